import { DynamicModule, Global, Module } from '@nestjs/common';
import { buildConfig, KILN_CONFIG, KilnConfig } from './kiln.config';

@Global()
@Module({})
export class KilnConfigModule {
  /** Validates the environment once at boot; tests pass their own overrides. */
  static forRoot(overrides: Partial<KilnConfig> = {}): DynamicModule {
    return {
      module: KilnConfigModule,
      // Built when the app is created, not when its module file is imported, so a bad
      // environment reaches the app's boot error handler instead of being an uncaught throw.
      providers: [{ provide: KILN_CONFIG, useFactory: (): KilnConfig => ({ ...buildConfig(process.env), ...overrides }) }],
      exports: [KILN_CONFIG],
    };
  }
}
