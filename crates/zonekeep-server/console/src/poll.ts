// Loading a page's data now and again every few seconds, while the page is shown.
import { useEffect, useRef, useState } from "./html.js";
import { describe } from "./api.js";

/** What a polled page shows: the last answer, the last error (cleared by a success), and when. */
export interface Polled<T> {
  data: T | null;
  error: string | null;
  at: number | null;
  /** Loads again now (after an action). */
  reload: () => void;
}

/**
 * Calls `load` at once and then `everyMs` after each answer (never two at a time), until the page
 * goes or `key` changes. `onData` hears every answer (a page that keeps a history).
 */
export function usePoll<T>(key: string, everyMs: number, load: () => Promise<T>, onData?: (d: T) => void): Polled<T> {
  const [state, setState] = useState<{ data: T | null; error: string | null; at: number | null }>({
    data: null,
    error: null,
    at: null,
  });
  const kick = useRef<() => void>(() => {});
  const loadRef = useRef(load);
  loadRef.current = load;
  const onDataRef = useRef(onData);
  onDataRef.current = onData;
  useEffect(() => {
    let alive = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let running = false;
    let again = false;
    setState({ data: null, error: null, at: null });
    const once = async () => {
      if (running) {
        again = true;
        return;
      }
      running = true;
      clearTimeout(timer);
      try {
        const data = await loadRef.current();
        if (!alive) return;
        onDataRef.current?.(data);
        setState({ data, error: null, at: Date.now() });
      } catch (e) {
        if (!alive) return;
        setState((s) => ({ ...s, error: describe(e) }));
      } finally {
        running = false;
        if (alive) {
          if (again) {
            again = false;
            void once();
          } else timer = setTimeout(() => void once(), everyMs);
        }
      }
    };
    kick.current = () => void once();
    void once();
    return () => {
      alive = false;
      clearTimeout(timer);
    };
  }, [key, everyMs]);
  return { ...state, reload: () => kick.current() };
}
