/**
 * Keyboard → movement intent. WASD or arrows set direction bits; Shift walks. The page reads the
 * current intent each time it sends an input, and is told at once when it changes (so a press is
 * predicted in the same frame).
 */
import { DIR_DOWN, DIR_LEFT, DIR_RIGHT, DIR_UP, FLAG_WALK } from "./movement.js";
const BITS = {
    KeyW: DIR_UP,
    ArrowUp: DIR_UP,
    KeyS: DIR_DOWN,
    ArrowDown: DIR_DOWN,
    KeyA: DIR_LEFT,
    ArrowLeft: DIR_LEFT,
    KeyD: DIR_RIGHT,
    ArrowRight: DIR_RIGHT,
};
/** Tracks held keys on a window. */
export class Keys {
    held = new Set();
    walk = false;
    /** Called after every change of the intent. */
    onChange = null;
    /** Listens on `target`; keys typed into form fields (the NetSim panel) are ignored. */
    constructor(target) {
        target.addEventListener("keydown", (e) => this.key(e, true));
        target.addEventListener("keyup", (e) => this.key(e, false));
        // A key released while the window had no focus never sends keyup: forget everything.
        target.addEventListener("blur", () => {
            this.held.clear();
            this.walk = false;
            this.onChange?.();
        });
    }
    key(e, down) {
        const t = e.target;
        if (t instanceof HTMLInputElement || t instanceof HTMLTextAreaElement)
            return;
        const before = this.current();
        if (e.code === "ShiftLeft" || e.code === "ShiftRight")
            this.walk = down;
        else if (BITS[e.code] !== undefined) {
            if (down)
                this.held.add(e.code);
            else
                this.held.delete(e.code);
            e.preventDefault();
        }
        else
            return;
        const after = this.current();
        if (after.dir !== before.dir || after.flags !== before.flags)
            this.onChange?.();
    }
    /** The intent now. */
    current() {
        let dir = 0;
        for (const code of this.held)
            dir |= BITS[code] ?? 0;
        return { dir, flags: this.walk ? FLAG_WALK : 0 };
    }
}
