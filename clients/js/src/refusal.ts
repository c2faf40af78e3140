/**
 * What the host's JSON routes answer when they refuse: `{"error": {"code", "message"}}`, read
 * the same way by every HTTP client of the SDK that is not a game connection.
 */

/** True for a plain JSON object. */
export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * The code and message a refusal of `status` with `body` stands for: the body's own, or, for an
 * answer without one (a proxy's page, an empty body), a code named after the status.
 */
export function refusalParts(status: number, body: unknown): { code: string; message: string } {
  const error = isObject(body) && isObject(body.error) ? body.error : {};
  const own = typeof error.code === "string" && error.code !== "" ? error.code : null;
  const code =
    own ??
    (status === 400
      ? "bad_request"
      : status === 401
        ? "unauthorized"
        : status === 404
          ? "not_found"
          : status === 429
            ? "rate_limited"
            : status >= 500
              ? "unavailable"
              : `http_${status}`);
  const message = typeof error.message === "string" ? error.message : `the host answered ${status}`;
  return { code, message };
}
