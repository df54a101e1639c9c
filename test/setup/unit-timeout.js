// Unit specs beside the code include some that talk to a fake upstream on 127.0.0.1 (the
// batch APIs' clients): on a loaded two-core machine several HTTP round trips took past
// Jest's 5 s default (a CI run beside other work). A slow machine is not what they test.
jest.setTimeout(20_000);
