import { isDatabaseUnavailable, isTransientConflict } from './query';

describe('isDatabaseUnavailable', () => {
  const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });

  it('an unreachable or departing PostgreSQL, however node-postgres, pg-pool or TypeORM reports it', () => {
    expect(isDatabaseUnavailable(withCode('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'))).toBe(true);
    expect(isDatabaseUnavailable(withCode('57P01', 'terminating connection due to administrator command'))).toBe(true);
    expect(isDatabaseUnavailable(withCode('57P03', 'the database system is starting up'))).toBe(true);
    expect(isDatabaseUnavailable(withCode('08006'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isDatabaseUnavailable(new Error('timeout exceeded when trying to connect'))).toBe(true);
    // TypeORM's QueryFailedError carries the driver's error.
    expect(isDatabaseUnavailable(Object.assign(new Error('q'), { driverError: { code: '57P01' } }))).toBe(true);
  });

  it('not a wrong query, a constraint or an ordinary bug', () => {
    expect(isDatabaseUnavailable(withCode('23505', 'duplicate key value violates unique constraint'))).toBe(false);
    expect(isDatabaseUnavailable(withCode('22021', 'invalid byte sequence for encoding "UTF8": 0x00'))).toBe(false);
    expect(isDatabaseUnavailable(new Error('Cannot read properties of undefined'))).toBe(false);
    expect(isDatabaseUnavailable(undefined)).toBe(false);
    expect(isDatabaseUnavailable('ECONNREFUSED')).toBe(false);
  });
});

describe('isTransientConflict', () => {
  const withCode = (code: string) => Object.assign(new Error('x'), { code });

  it('a deadlock, a serialization failure or a lock timeout, wrapped by TypeORM or not', () => {
    expect(isTransientConflict(withCode('40P01'))).toBe(true);
    expect(isTransientConflict(withCode('40001'))).toBe(true);
    expect(isTransientConflict(Object.assign(new Error('q'), { driverError: { code: '55P03' } }))).toBe(true);
  });

  it('not an outage, a constraint or a bug', () => {
    expect(isTransientConflict(withCode('57P01'))).toBe(false);
    expect(isTransientConflict(withCode('23505'))).toBe(false);
    expect(isTransientConflict(new Error('Cannot read properties of undefined'))).toBe(false);
    expect(isTransientConflict(undefined)).toBe(false);
  });
});
