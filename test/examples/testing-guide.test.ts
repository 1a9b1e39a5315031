// docs/testing.md shows only code its examples run: each TypeScript block is in examples/testing.
import { readdir, readFile } from 'node:fs/promises';
import { expect, it } from 'vitest';

const GUIDE = new URL('../../docs/testing.md', import.meta.url);
const EXAMPLES = new URL('../../examples/testing/', import.meta.url);

/** A text's lines without their indentation, blank ones dropped: what a snippet must match. */
function lines(text: string): string[] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
}

/** Whether `part` runs as consecutive lines somewhere in `whole`. */
function contains(whole: readonly string[], part: readonly string[]): boolean {
  for (let start = 0; start + part.length <= whole.length; start++) {
    if (part.every((line, i) => whole[start + i] === line)) return true;
  }
  return false;
}

it('quotes, in every TypeScript block, lines that stand in one of the example files', async () => {
  const guide = await readFile(GUIDE, 'utf8');
  const blocks = [...guide.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1] as string);
  const names = (await readdir(EXAMPLES)).filter((name) => name.endsWith('.ts'));
  const files = await Promise.all(
    names.map(async (name) => lines(await readFile(new URL(name, EXAMPLES), 'utf8'))),
  );
  expect(blocks.length).toBeGreaterThan(10);
  const missing = blocks.filter((block) => !files.some((file) => contains(file, lines(block))));
  expect(missing).toEqual([]);
});
