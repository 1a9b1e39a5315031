// What the store knows of Redis's clock: the interval replies narrow, drift widens, and a step restarts.
import { describe, expect, it } from 'vitest';
import { ServerClock } from '../../src/stores/redis/server-clock.ts';

/** Redis's clock runs this far ahead of performance.now() in these tests. */
const OFFSET = 1_700_000_000_000;

/** A reply to a call sent at `sentAt` and read at `readAt` that Redis ran at local time `ranAt`. */
function reply(clock: ServerClock, sentAt: number, ranAt: number, readAt: number, offset = OFFSET) {
  clock.observe(Math.floor(ranAt + offset), sentAt, readAt);
}

describe('a ServerClock', () => {
  it('takes the clocks to agree before any reply', () => {
    const clock = new ServerClock();
    expect(clock.earliest(1_000)).toBe(performance.timeOrigin + 1_000);
  });

  it('never reads later than Redis could, and narrows with each reply', () => {
    const clock = new ServerClock();
    // Sent at 100, read 8 ms later: Redis ran it somewhere in between.
    reply(clock, 100, 104, 108);
    const wide = clock.earliest(108);
    expect(wide).toBeLessThanOrEqual(108 + OFFSET);
    expect(108 + OFFSET - wide).toBeGreaterThanOrEqual(4);
    // A quick reply narrows it to under a millisecond and a half.
    reply(clock, 200, 200.2, 200.4);
    const narrow = clock.earliest(200.4);
    expect(narrow).toBeLessThanOrEqual(200.4 + OFFSET);
    expect(200.4 + OFFSET - narrow).toBeLessThan(1.5);
    // A slow reply later does not widen it again.
    reply(clock, 300, 301, 330);
    expect(300 + OFFSET - clock.earliest(300)).toBeLessThan(1.5);
  });

  it('allows for drift in the time since the last reply', () => {
    const clock = new ServerClock();
    reply(clock, 0, 0.2, 0.4);
    const soon = 0.4 + OFFSET - clock.earliest(0.4);
    // An hour without replies: the clocks may have drifted apart by up to 720 ms.
    const hour = 3_600_000;
    const later = hour + OFFSET - clock.earliest(hour);
    expect(later - soon).toBeCloseTo(hour * 2e-4, 0);
    // A Redis clock that ran 100 ppm slow all that hour still reads no earlier than that.
    expect(clock.earliest(hour)).toBeLessThanOrEqual(hour + OFFSET - hour * 1e-4);
  });

  it("starts anew from a reply no drift explains, as after Redis's clock was set", () => {
    const clock = new ServerClock();
    reply(clock, 0, 0.2, 0.4);
    // Redis's clock was set back by ten seconds.
    reply(clock, 1_000, 1_000.2, 1_000.4, OFFSET - 10_000);
    const earliest = clock.earliest(1_000.4);
    expect(earliest).toBeLessThanOrEqual(1_000.4 + OFFSET - 10_000);
    expect(1_000.4 + OFFSET - 10_000 - earliest).toBeLessThan(1.5);
  });
});
