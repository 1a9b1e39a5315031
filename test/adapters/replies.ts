// Sequential GETs reduced to what per-route tests compare: status, policy header, remaining count.

export interface Reply {
  status: number;
  /** The RateLimit-Policy header, or null. */
  policy: string | null;
  /** The `remaining` of the decision the route was shown, from its JSON body. */
  remaining: number | undefined;
}

/** Sends `times` GETs to `url` one after another; `remainingOf` reads a 2xx JSON body. */
export async function getMany(
  url: string,
  times: number,
  remainingOf: (body: unknown) => number | undefined,
): Promise<Reply[]> {
  const replies: Reply[] = [];
  for (let i = 0; i < times; i++) {
    const response = await fetch(url);
    const text = await response.text();
    replies.push({
      status: response.status,
      policy: response.headers.get('ratelimit-policy'),
      remaining: response.ok ? remainingOf(JSON.parse(text)) : undefined,
    });
  }
  return replies;
}
