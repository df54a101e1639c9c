export * from './entities';
export * from './data-source';
export * from './database.module';
export * from './pagination';
export * from './query';
export * from './migrations';
