// How numbers read on the console: durations, sizes, times, digests.

/** A duration in milliseconds: `850 ms`, `3.2 s`, `4 min 5 s`. */
export function ms(v: number | null | undefined): string {
  if (v === null || v === undefined) return "—";
  if (v < 1000) return `${Math.round(v)} ms`;
  if (v < 60_000) return `${(v / 1000).toFixed(1)} s`;
  const m = Math.floor(v / 60_000);
  return `${m} min ${Math.round((v % 60_000) / 1000)} s`;
}

/** A duration in microseconds: `740 µs`, `1.25 ms`. */
export function us(v: number | null | undefined): string {
  if (v === null || v === undefined) return "—";
  if (v < 1000) return `${v} µs`;
  return `${(v / 1000).toFixed(2)} ms`;
}

/** A byte count: `512 B`, `12.3 KiB`, `4.0 MiB`. */
export function bytes(v: number | null | undefined): string {
  if (v === null || v === undefined) return "—";
  if (v < 1024) return `${Math.round(v)} B`;
  if (v < 1024 * 1024) return `${(v / 1024).toFixed(1)} KiB`;
  if (v < 1024 * 1024 * 1024) return `${(v / 1024 / 1024).toFixed(1)} MiB`;
  return `${(v / 1024 / 1024 / 1024).toFixed(2)} GiB`;
}

/** A wall-clock time in milliseconds since the Unix epoch, in the browser's time zone. */
export function when(v: number | null | undefined): string {
  if (v === null || v === undefined || v === 0) return "—";
  const d = new Date(v);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** A clock time of day (for "updated at"). */
export function clock(v: number): string {
  return when(v).slice(11);
}

/** Yes or no. */
export function yes(v: boolean | null | undefined): string {
  return v === null || v === undefined ? "—" : v ? "yes" : "no";
}

/** A number with thousands separated (`12 345`). */
export function count(v: number | null | undefined): string {
  if (v === null || v === undefined) return "—";
  return String(v).replace(/\B(?=(\d{3})+(?!\d))/g, " ");
}

/** The first 12 hex digits of a digest. */
export function short(sha: string | null | undefined): string {
  return sha === null || sha === undefined ? "—" : sha.slice(0, 12);
}
