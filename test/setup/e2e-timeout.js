// e2e specs boot Nest apps and wait on real queues: 5 s is too short under load.
jest.setTimeout(60000);
