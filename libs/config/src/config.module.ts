import { DynamicModule, Global, Module } from '@nestjs/common';
import { buildConfig, KILN_CONFIG, KilnConfig } from './kiln.config';

@Global()
@Module({})
export class KilnConfigModule {
  /** Validates the environment once at boot; tests pass their own overrides. */
  static forRoot(overrides: Partial<KilnConfig> = {}): DynamicModule {
    const config = { ...buildConfig(process.env), ...overrides };
    return {
      module: KilnConfigModule,
      providers: [{ provide: KILN_CONFIG, useValue: config }],
      exports: [KILN_CONFIG],
    };
  }
}
