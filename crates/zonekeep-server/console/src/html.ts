// The page's one way to write markup: htm's tagged templates over Preact's `h` (React's model, no
// JSX build step), and the few Preact names every page uses.
import { h, type VNode } from "./vendor/preact.js";
import htm from "./vendor/htm.js";

export { render } from "./vendor/preact.js";
export { useCallback, useEffect, useMemo, useRef, useState } from "./vendor/hooks.js";

/** What a component returns. */
export type View = VNode | VNode[] | null;

/** `html\`<p class="x">${text}</p>\`` builds Preact elements. */
export const html = htm.bind<VNode>(h as (type: unknown, props: Record<string, unknown>, ...children: unknown[]) => VNode);
