// What the concurrency suites of this package and @sentinel/fetch share: a gate a handler waits on, a GET read to its end, and a body read as text.

/** A promise the test settles: a handler waits on it mid-way. */
export function gate() {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { open, opened };
}

/** The status of one GET, its body read so that the request is over. */
export async function statusOf(url: string): Promise<number> {
  const response = await fetch(url);
  await response.arrayBuffer();
  return response.status;
}

/** Reads `reader` to its end, as text. */
export async function rest(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  const decoder = new TextDecoder();
  let text = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text;
    text += decoder.decode(value, { stream: true });
  }
}
