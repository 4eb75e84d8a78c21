import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "./logger";

export interface LimiterOptions {
  capacity: number;
  refillPerSecond: number;
}

type Clock = () => number;

export enum Decision {
  Allow,
  Deny,
}

export function systemClock(): number {
  return Date.now() / 1000;
}

export class TokenBucket {
  private tokens: number;
  private updatedAt: number;

  constructor(private readonly options: LimiterOptions, private clock: Clock = systemClock) {
    this.tokens = options.capacity;
    this.updatedAt = clock();
  }

  private refill(): void {
    const now = this.clock();
    const elapsed = now - this.updatedAt;
    this.tokens = Math.min(this.options.capacity, this.tokens + elapsed * this.options.refillPerSecond);
    this.updatedAt = now;
  }

  take(cost = 1): Decision {
    this.refill();
    if (this.tokens < cost) {
      // cursor here
      return Decision.Deny;
    }
    this.tokens -= cost;
    return Decision.Allow;
  }

  async waitFor(cost: number, log?: Logger): Promise<void> {
    while (this.take(cost) === Decision.Deny) {
      log?.debug(`waiting for ${cost} tokens`);
      await sleep(50);
    }
  }
}

export const createLimiter = (options: LimiterOptions): TokenBucket => {
  return new TokenBucket(options);
};
