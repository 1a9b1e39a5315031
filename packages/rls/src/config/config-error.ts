// The one error a configuration raises: which file (or setting), which field, and what is wrong.

/**
 * A configuration that cannot be loaded. The message is one line, `source: field: problem`,
 * so that a log shows at once which file to open and where to look.
 *
 * @example
 * config/bad.yaml: descriptors[0].rate_limit.unit: unknown unit 'foos' (expected second, …)
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';

  constructor(
    /** The file (or the setting, such as `MERGE_DOMAIN_CONFIG`) at fault. */
    readonly source: string,
    /** Where in it, as `descriptors[0].rate_limit.unit`; undefined for the file as a whole. */
    readonly field: string | undefined,
    /** What is wrong, in a few words. */
    readonly problem: string,
  ) {
    super([source, field, oneLine(problem)].filter((part) => part !== undefined).join(': '));
  }
}

/** A parser's message can run over several lines (a code frame); a log line keeps the first. */
function oneLine(text: string): string {
  return (text.split('\n', 1)[0] ?? '').trim();
}
