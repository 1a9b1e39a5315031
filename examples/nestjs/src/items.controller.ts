// The public API: limited by the module's tiers, a search costing five, and a health check never limited.
import { Controller, Get, Req } from '@nestjs/common';
import { RateLimit, type SentinelRequest, SkipRateLimit } from '@sentinel/nestjs';
import { Public } from './auth/public.decorator.js';

@Controller()
@Public()
export class ItemsController {
  @Get()
  root(@Req() req: SentinelRequest) {
    // The decision Sentinel's guard left on the request: its tier and what is left.
    return { tier: req.rateLimit?.tier ?? null, remaining: req.rateLimit?.remaining ?? null };
  }

  /** Layered over the module's options: the same tiers and budget, five units a search. */
  @Get('search')
  @RateLimit({ cost: 5 })
  search(@Req() req: SentinelRequest) {
    return { results: [], remaining: req.rateLimit?.remaining ?? null };
  }

  @Get('health')
  @SkipRateLimit()
  health() {
    return { ok: true };
  }
}
