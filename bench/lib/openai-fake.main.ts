/**
 * The peer-gateway scenario's upstream (OpenAiFakeUpstream: OpenAI's images endpoint answering
 * a real PNG) in a process of its own, so that the bench's load generation cannot delay its
 * answers. Reports `{type: 'ready', baseUrl}` over IPC; ends on SIGTERM and when the bench goes
 * away (the IPC channel closes).
 */
import { OpenAiFakeUpstream } from '../../libs/testing/src/fakes/openai/openai.fake';

const fake = new OpenAiFakeUpstream();

process.on('disconnect', () => process.exit(0));
process.on('SIGTERM', () => void fake.stop().finally(() => process.exit(0)));
void fake.start().then((baseUrl) => process.send?.({ type: 'ready', baseUrl }));
