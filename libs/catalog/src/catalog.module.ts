import { Module } from '@nestjs/common';
import { CatalogService } from './catalog.service';
import { RouteHealthStore } from './route-health.store';

@Module({ providers: [CatalogService, RouteHealthStore], exports: [CatalogService, RouteHealthStore] })
export class CatalogModule {}
