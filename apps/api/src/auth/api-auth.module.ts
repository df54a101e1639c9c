import { Module } from '@nestjs/common';
import { AuthFailureThrottle } from './auth-failure-throttle.service';
import { RateLimitService } from './rate-limit.service';

/**
 * The limiters every kind of authentication shares. One module, so the process has one
 * RateLimitService: one in-memory fallback store and one set of fallback counters.
 */
@Module({
  providers: [RateLimitService, AuthFailureThrottle],
  exports: [RateLimitService, AuthFailureThrottle],
})
export class ApiAuthModule {}
