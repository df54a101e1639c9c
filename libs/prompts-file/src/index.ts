export * from './prompts-file';
