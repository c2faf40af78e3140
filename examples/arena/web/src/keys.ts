/**
 * Keyboard → movement intent. WASD or arrows set direction bits; Shift walks. The page reads the
 * current intent each time it sends an input, and is told at once when it changes (so a press is
 * predicted in the same frame).
 */

import { DIR_DOWN, DIR_LEFT, DIR_RIGHT, DIR_UP, FLAG_WALK, type MoveInput } from "./movement.js";

const BITS: Record<string, number> = {
  KeyW: DIR_UP,
  ArrowUp: DIR_UP,
  KeyS: DIR_DOWN,
  ArrowDown: DIR_DOWN,
  KeyA: DIR_LEFT,
  ArrowLeft: DIR_LEFT,
  KeyD: DIR_RIGHT,
  ArrowRight: DIR_RIGHT,
};

/** Input types that are not text entry: a click or an arrow key operates them. */
const CONTROL_INPUTS = new Set(["range", "checkbox", "radio", "button", "submit", "reset", "color", "file", "image"]);

/** Whether typing goes into `t` (a text field, a text area or editable content). */
function takesText(t: EventTarget | null): boolean {
  if (t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement) return true;
  if (t instanceof HTMLInputElement) return !CONTROL_INPUTS.has(t.type);
  return t instanceof HTMLElement && t.isContentEditable;
}

/** Tracks held keys on a window. */
export class Keys {
  private readonly held = new Set<string>();
  private walk = false;
  /** Called after every change of the intent. */
  onChange: (() => void) | null = null;

  /**
   * Listens on `target`. Keys typed into a text field are the field's; everywhere else, including a
   * focused panel control such as a NetSim slider, the game keys move the player and do not reach
   * the control (an arrow key would otherwise both move the player and drag the slider).
   */
  constructor(target: Window) {
    target.addEventListener("keydown", (e) => this.key(e, true));
    target.addEventListener("keyup", (e) => this.key(e, false));
    // A key released while the window had no focus never sends keyup: forget everything.
    target.addEventListener("blur", () => this.release());
  }

  /**
   * Lets go of every held key, as if all were released: for when keys stop reaching the game (the
   * window lost the focus, or a text field such as the chat box took it while a key was held).
   */
  release(): void {
    this.held.clear();
    this.walk = false;
    this.onChange?.();
  }

  private key(e: KeyboardEvent, down: boolean): void {
    if (takesText(e.target)) return;
    const before = this.current();
    if (e.code === "ShiftLeft" || e.code === "ShiftRight") this.walk = down;
    else if (BITS[e.code] !== undefined) {
      if (down) this.held.add(e.code);
      else this.held.delete(e.code);
      e.preventDefault();
    } else return;
    const after = this.current();
    if (after.dir !== before.dir || after.flags !== before.flags) this.onChange?.();
  }

  /** The intent now. */
  current(): MoveInput {
    let dir = 0;
    for (const code of this.held) dir |= BITS[code] ?? 0;
    return { dir, flags: this.walk ? FLAG_WALK : 0 };
  }
}
