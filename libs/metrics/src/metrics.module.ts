import { Module } from '@nestjs/common';
import { KilnMetrics } from './kiln.metrics';

/** One KilnMetrics per process: Nest shares this module's instance wherever it is imported. */
@Module({ providers: [KilnMetrics], exports: [KilnMetrics] })
export class MetricsModule {}
