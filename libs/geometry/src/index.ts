export * from './image-geometry';
export * from './batch-tier';
