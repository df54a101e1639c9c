import { Controller, Get, Res, ServiceUnavailableException } from '@nestjs/common';
import type { Response } from 'express';
import { ErrorCode } from '@app/errors';
import { ApiExcludeController } from '@nestjs/swagger';
import { HealthCheckService, HealthIndicatorService, TypeOrmHealthIndicator } from '@nestjs/terminus';
import { RedisService } from '@app/redis';
import { StorageDriver } from '@app/storage';

/** /healthz: the process answers. /readyz: PostgreSQL, Redis and the object store answer too. */
@ApiExcludeController()
@Controller()
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly db: TypeOrmHealthIndicator,
    private readonly indicators: HealthIndicatorService,
    private readonly redis: RedisService,
    private readonly storage: StorageDriver,
  ) {}

  @Get('healthz')
  live(): { status: 'ok' } {
    return { status: 'ok' };
  }

  @Get('readyz')
  async ready(@Res({ passthrough: true }) res: Response) {
    try {
      return await this.check();
    } catch (err) {
      // Not ready is an expected answer for load balancers (503), not an unexpected error.
      const details = err instanceof ServiceUnavailableException ? (err.getResponse() as object) : {};
      res.status(503);
      res.setHeader('Retry-After', '5');
      return { error: { code: ErrorCode.ServiceUnavailable, message: 'Not ready', details } };
    }
  }

  private check() {
    return this.health.check([
      () => this.db.pingCheck('database', { timeout: 1500 }),
      async () => {
        const indicator = this.indicators.check('redis');
        return (await this.redis.ping(1500)) ? indicator.up() : indicator.down({ message: 'Redis did not answer PING' });
      },
      async () => {
        const indicator = this.indicators.check('storage');
        try {
          await this.storage.check(1500);
          return indicator.up();
        } catch (err) {
          return indicator.down({ message: (err as Error).message });
        }
      },
    ]);
  }
}
