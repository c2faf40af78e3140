// A live line chart (uPlot): one line per series over a time axis, redrawn with each new point.
import uPlot from "./vendor/uplot.js";
import { html, useEffect, useRef, type View } from "./html.js";

/** Line colours, in series order. */
const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"];

/**
 * `names` are the series, `data` is `[times (s), ...one array per series]` (null: no value then),
 * `unit` labels the y axis.
 */
export function Chart({ names, data, unit }: { names: string[]; data: (number | null)[][]; unit: string }): View {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const shape = names.join("\n");
  useEffect(() => {
    const el = box.current;
    if (el === null) return;
    const opts: uPlot.Options = {
      width: Math.max(el.clientWidth, 320),
      height: 260,
      // An arcsinh scale: linear near 0, logarithmic past it, so a 5 ms save and a 20 µs tick both
      // read, and a stage that took no time sits at 0.
      scales: {
        x: { time: true },
        y: { distr: 4, log: 10, asinh: 1, range: (_u, _min, max) => [0, 10 ** Math.ceil(Math.log10(Math.max(max, 10)))] },
      },
      // Labels at 0 and the powers of ten only (durations are never negative).
      axes: [{}, { label: unit, size: 70, filter: (_u, splits) => splits.map((v) => (v === 0 || /^10*$/.test(String(v)) ? v : null)) }],
      series: [{}, ...names.map((n, i) => ({ label: n, stroke: COLOURS[i % COLOURS.length], width: 1.5, spanGaps: false }))],
      legend: { live: true },
    };
    const u = new uPlot(opts, data as uPlot.AlignedData, el);
    plot.current = u;
    const resize = new ResizeObserver(() => u.setSize({ width: Math.max(el.clientWidth, 320), height: 260 }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      u.destroy();
      plot.current = null;
    };
    // The chart is made anew when its series change; new points go through setData below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [shape, unit]);
  useEffect(() => {
    plot.current?.setData(data as uPlot.AlignedData);
  }, [data]);
  return html`<div class="chart" ref=${box}></div>`;
}
