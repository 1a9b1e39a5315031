// GET /_sentinel: the status page, one HTML file with its script and styles inline; /_sentinel/stats feeds it.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { ADMIN_PREFIX, requireToken, UNLIMITED } from './admin-access.ts';
import type { DecisionStats } from './decision-stats.ts';
import type { QuotaInspector, TierView } from './quota-inspector.ts';

const PAGE = readFileSync(new URL('./status-page.html', import.meta.url), 'utf8');

export interface StatusPageOptions {
  stats: DecisionStats;
  inspector: QuotaInspector;
  /** The admin token the page asks for; undefined leaves it open, for a loopback gateway. */
  token: string | undefined;
}

/** Registers the page and its data, behind the token when there is one. */
export function registerStatusPage(
  app: FastifyInstance,
  { stats, inspector, token }: StatusPageOptions,
): void {
  // A browser cannot send a Bearer token on navigation: Basic auth lets it ask for the token.
  const route =
    token === undefined
      ? UNLIMITED
      : { ...UNLIMITED, onRequest: requireToken(token, { basic: true }) };

  app.get(ADMIN_PREFIX, route, async (_request, reply) => {
    // Only this response's own script and style run: a nonce per response.
    const nonce = randomBytes(16).toString('base64');
    const page = PAGE.replaceAll('{{nonce}}', nonce).replace(
      '<!-- tiers -->',
      tiersTable(await inspector.tiers()),
    );
    return reply
      .type('text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .header(
        'content-security-policy',
        `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; frame-ancestors 'none'`,
      )
      .send(page);
  });

  app.get(`${ADMIN_PREFIX}/stats`, route, async (_request, reply) =>
    reply.header('cache-control', 'no-store').send(stats.snapshot()),
  );
}

/** Tier names come from the configuration file: escaped like any other text. */
function escapeHtml(text: string): string {
  const entities: Record<string, string> = {
    '&': '&amp;',
    '<': '&lt;',
    '>': '&gt;',
    '"': '&quot;',
    "'": '&#39;',
  };
  return text.replace(/[&<>"']/g, (char) => entities[char] as string);
}

function tiersTable(tiers: readonly TierView[]): string {
  const rows = tiers.flatMap(({ name, policies }) =>
    policies.map(
      ({ policy, limit, window, algorithm }, i) =>
        `<tr data-tier="${escapeHtml(name)}" data-policy="${escapeHtml(policy)}">` +
        (i === 0 ? `<th rowspan="${policies.length}">${escapeHtml(name)}</th>` : '') +
        `<td><code>${escapeHtml(policy)}</code></td><td class="number">${limit}</td>` +
        `<td>per ${escapeHtml(window)}</td><td class="muted">${escapeHtml(algorithm)}</td></tr>`,
    ),
  );
  return [
    '<table id="tiers"><thead><tr><th>tier</th><th>policy</th><th class="number">limit</th>',
    '<th>window</th><th>algorithm</th></tr></thead><tbody>',
    ...rows,
    '</tbody></table>',
  ].join('');
}
