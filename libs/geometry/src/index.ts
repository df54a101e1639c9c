export * from './image-geometry';
