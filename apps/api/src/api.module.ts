import { Module, RequestMethod } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { PassportModule } from '@nestjs/passport';
import { TerminusModule } from '@nestjs/terminus';
import { LoggerModule } from 'nestjs-pino';
import type { IncomingMessage } from 'node:http';
import { AccountsModule } from '@app/accounts';
import { BatchesModule } from '@app/batches';
import { KilnQueueModule, TasksModule } from '@app/tasks';
import { BillingModule } from '@app/billing';
import { CatalogModule } from '@app/catalog';
import { appLogDestination, KILN_CONFIG, KilnConfig, KilnConfigModule } from '@app/config';
import { DatabaseModule } from '@app/database';
import { KeysModule } from '@app/keys';
import { MetricsModule } from '@app/metrics';
import { PaymentsModule } from '@app/payments';
import { RedisModule } from '@app/redis';
import { StorageModule } from '@app/storage';
import { UploadsModule } from '@app/uploads';
import { WebhooksModule } from '@app/webhooks';
import { AdminAccountsController } from './admin/admin-accounts.controller';
import { AdminCreditPacksController } from './admin/admin-credit-packs.controller';
import { AdminGuard } from './admin/admin.guard';
import { AdminModelsController } from './admin/admin-models.controller';
import { AdminProvidersController } from './admin/admin-providers.controller';
import { AdminPlansController } from './admin/admin-plans.controller';
import { AdminQueuesController } from './admin/admin-queues.controller';
import { AdminUsageController } from './admin/admin-usage.controller';
import { AdminSupportController } from './admin/admin-support.controller';
import { BatchesController } from './batches/batches.controller';
import { OpenAiImagesController } from './openai/openai-images.controller';
import { ApiKeyGuard } from './auth/api-key.guard';
import { ApiKeyStrategy } from './auth/api-key.strategy';
import { ApiAuthModule } from './auth/api-auth.module';
import { DashboardApiModule } from './dashboard/dashboard.module';
import { ErrorFilter } from './errors/error.filter';
import { FilesController } from './files/files.controller';
import { HealthController } from './health/health.controller';
import { requestId } from './http/request-id';
import { MeController } from './me/me.controller';
import { ApiMetricsCollector } from './metrics/api-metrics';
import { MetricsController } from './metrics/metrics.controller';
import { ModelsController } from './models/models.controller';
import { StripeWebhookController } from './stripe/stripe-webhook.controller';
import { UploadsController } from './uploads/uploads.controller';
import { WebhooksController } from './webhooks/webhooks.controller';

/** The request part of an access log line (pino-http's serialized request, without headers). */
function accessLogRequest(req: { id: unknown; method: string; url: string; remoteAddress?: string; headers: Record<string, unknown> }) {
  return { id: req.id, method: req.method, url: req.url, remoteAddress: req.remoteAddress, userAgent: req.headers['user-agent'] };
}

function accessLogResponse(res: { statusCode: number }) {
  return { statusCode: res.statusCode };
}

@Module({
  imports: [
    KilnConfigModule.forRoot(),
    LoggerModule.forRootAsync({
      inject: [KILN_CONFIG],
      useFactory: (config: KilnConfig) => ({
        // Every route, in Express 5's path syntax (nestjs-pino's default '*' draws a
        // LegacyRouteConverter warning on each boot).
        forRoutes: [{ path: '{*path}', method: RequestMethod.ALL }],
        pinoHttp: [
          {
            level: config.logLevel,
            genReqId: requestId,
            autoLogging: { ignore: (req: IncomingMessage) => req.url === '/healthz' || req.url === '/readyz' || req.url === '/metrics' },
            // The access line names the request, not its headers: no credential, cookie or
            // client header reaches the log, and a poll's line costs no header copy or redaction.
            serializers: { req: accessLogRequest, res: accessLogResponse },
          },
          appLogDestination(),
        ],
      }),
    }),
    DatabaseModule.forRoot(),
    RedisModule,
    KilnQueueModule.forRoot({ producerOnly: true }),
    PassportModule,
    ApiAuthModule,
    TerminusModule,
    BillingModule,
    AccountsModule,
    KeysModule,
    CatalogModule,
    BatchesModule,
    TasksModule,
    DashboardApiModule,
    StorageModule,
    UploadsModule,
    MetricsModule,
    WebhooksModule,
    PaymentsModule,
  ],
  controllers: [
    HealthController,
    ModelsController,
    MeController,
    BatchesController,
    OpenAiImagesController,
    UploadsController,
    FilesController,
    WebhooksController,
    AdminAccountsController,
    AdminModelsController,
    AdminProvidersController,
    AdminPlansController,
    AdminQueuesController,
    AdminUsageController,
    AdminSupportController,
    AdminCreditPacksController,
    StripeWebhookController,
    MetricsController,
  ],
  providers: [{ provide: APP_FILTER, useClass: ErrorFilter }, ApiKeyStrategy, ApiKeyGuard, AdminGuard, ApiMetricsCollector],
})
export class ApiModule {}
