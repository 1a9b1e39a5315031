// Reads a ledger of admissions against the promise of each algorithm (see docs/leases.md): which
// windows, or for a bucket which intervals, hold more than the limit allows, and how much of the
// limit the fleet used.

/** One admission: Unix ms when its call was sent, and when its answer came. */
export interface Admission {
  readonly sent: number;
  readonly answered: number;
}

export interface LedgerPolicy {
  readonly algorithm: string;
  readonly limit: number;
  readonly windowMs: number;
}

export interface Findings {
  readonly admitted: number;
  /** Each window or interval that holds more than the limit allows. */
  readonly violations: string[];
}

/** The run, as the ledger saw it: from the first send to the last answer. */
function runOf(admissions: readonly Admission[]): { startedAt: number; endedAt: number } {
  if (admissions.length === 0) return { startedAt: 0, endedAt: 0 };
  let startedAt = Number.POSITIVE_INFINITY;
  let endedAt = Number.NEGATIVE_INFINITY;
  for (const { sent, answered } of admissions) {
    startedAt = Math.min(startedAt, sent);
    endedAt = Math.max(endedAt, answered);
  }
  return { startedAt, endedAt: Math.max(startedAt, endedAt) };
}

/** The most admissions the limit allows over the run, by the algorithm's promise. */
function mostAllowed(admissions: readonly Admission[], policy: LedgerPolicy): number {
  const { algorithm, limit, windowMs } = policy;
  const { startedAt, endedAt } = runOf(admissions);
  const span = endedAt - startedAt;
  if (algorithm === 'token-bucket' || algorithm === 'gcra') {
    // A full bucket, and a refill of `limit` per window.
    return limit + (limit * span) / windowMs;
  }
  if (algorithm === 'sliding-window-log') return limit * Math.ceil(span / windowMs + 1);
  // Each window the run touches, aligned to the epoch.
  return limit * (Math.floor(endedAt / windowMs) - Math.floor(startedAt / windowMs) + 1);
}

/**
 * The admissions as a share of the most the limit allows over their run, to three decimals: a
 * low share shows false 429s.
 */
export function usedShare(admissions: readonly Admission[], policy: LedgerPolicy): number {
  if (admissions.length === 0) return 0;
  return Math.round((admissions.length / mostAllowed(admissions, policy)) * 1000) / 1000;
}

/**
 * An admission happened at some instant between its send and its answer (Date.now() reads whole
 * ms, so before answered + 1): only admissions certain to fall inside a window count in it, and
 * an interval is taken as long as it may be. A violation found so is certain.
 */
export function checkLedger(admissions: readonly Admission[], policy: LedgerPolicy): Findings {
  const { algorithm, limit, windowMs } = policy;
  const violations: string[] = [];
  const bySent = [...admissions].sort((a, b) => a.sent - b.sent);
  if (algorithm === 'token-bucket' || algorithm === 'gcra') {
    // A full bucket, and a refill of `limit` per window: at most limit + limit * d / window in
    // any interval of d ms.
    for (let i = 0; i < bySent.length; i++) {
      const from = (bySent[i] as Admission).sent;
      const after = bySent
        .slice(i)
        .map((a) => a.answered)
        .sort((a, b) => a - b);
      // The interval from here where the count most exceeds what is allowed, if any.
      let worst: string | undefined;
      let excess = 0;
      for (let m = 0; m < after.length; m++) {
        const to = after[m] as number;
        const allowed = limit + Math.floor((limit * (to + 1 - from)) / windowMs);
        if (m + 1 - allowed > excess) {
          excess = m + 1 - allowed;
          worst = `${m + 1} admitted in [${from}, ${to}], at most ${allowed}`;
        }
      }
      if (worst !== undefined) violations.push(worst);
      if (violations.length > 10) break;
    }
  } else if (algorithm === 'sliding-window-log') {
    for (let i = 0; i < bySent.length; i++) {
      const from = (bySent[i] as Admission).sent;
      let inside = 0;
      for (let k = i; k < bySent.length; k++) {
        const a = bySent[k] as Admission;
        if (a.answered + 1 <= from + windowMs) inside++;
      }
      if (inside > limit) violations.push(`${inside} admitted in [${from}, ${from + windowMs})`);
      if (violations.length > 10) break;
    }
  } else {
    // Fixed windows, aligned to the epoch: each holds at most the limit. The sliding window
    // counter also never lets the previous window's count, weighted by how much of it the
    // sliding window still overlaps, and the current one's, pass the limit.
    const windowOf = ({ sent, answered }: Admission) => {
      const window = Math.floor(sent / windowMs);
      return Math.floor(answered / windowMs) === window ? window : undefined;
    };
    const perWindow = new Map<number, number>();
    for (const admission of admissions) {
      const window = windowOf(admission);
      if (window !== undefined) perWindow.set(window, (perWindow.get(window) ?? 0) + 1);
    }
    for (const [window, count] of perWindow) {
      if (count > limit) violations.push(`${count} admitted in window ${window * windowMs}`);
    }
    if (algorithm === 'sliding-window-counter') {
      for (const at of admissions) {
        const window = windowOf(at);
        if (window === undefined) continue;
        const previous = perWindow.get(window - 1) ?? 0;
        // At the latest the decision may have been made: the previous window weighs least then.
        const elapsed = Math.min(windowMs, at.answered + 1 - window * windowMs);
        const current = admissions.filter(
          (a) => windowOf(a) === window && a.answered <= at.answered,
        ).length;
        const weighted = previous * (1 - elapsed / windowMs) + current;
        if (weighted > limit + 1e-9) {
          violations.push(`${weighted.toFixed(1)} weighted by ${at.answered}`);
          if (violations.length > 10) break;
        }
      }
    }
  }
  return { admitted: admissions.length, violations };
}
