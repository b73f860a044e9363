import { describe, expect, it } from 'vitest';
import { envSchema } from '../../../src/config/env.ts';
import { describeMisspelling, misspelledVariables } from '../../../src/config/misspelled-variables.ts';

const only = (name: string) => misspelledVariables({ [name]: 'some value' });

describe('misspelledVariables: a name that is not ours but looks like one of ours', () => {
  it.each([
    { description: 'two letters swapped', name: 'PROT', meant: 'PORT' },
    { description: 'two letters swapped, in a longer name', name: 'REDIS_ULR', meant: 'REDIS_URL' },
    { description: 'the words in another order', name: 'PORT_OPS', meant: 'OPS_PORT' },
    { description: 'a letter missing', name: 'DATABSE_URL', meant: 'DATABASE_URL' },
    { description: 'a letter too many', name: 'DATA_DIRS', meant: 'DATA_DIR' },
    { description: 'one letter wrong (British spelling)', name: 'LICENCE_API_KEYS', meant: 'LICENSE_API_KEYS' },
    { description: 'the underscore left out', name: 'LOGLEVEL', meant: 'LOG_LEVEL' },
    { description: 'lower case', name: 'port', meant: 'PORT' },
    { description: 'a swap in a secret\'s name', name: 'ADMIN_PASSWROD', meant: 'ADMIN_PASSWORD' },
  ])('$description: $name → $meant', ({ name, meant }) => {
    expect(only(name)).toEqual([{ variable: name, meant }]);
  });

  it.each([
    { description: 'ours', name: 'PORT' },
    { description: 'two edits that are no swap (HOME is not HOST)', name: 'HOME' },
    { description: 'two edits that are no swap, sharing a word (APP_PORT is not OPS_PORT)', name: 'APP_PORT' },
    { description: 'too short to tell', name: 'PWD' },
    { description: 'Node\'s own', name: 'NODE_ENV' },
    { description: 'npm\'s own', name: 'npm_config_port' },
    { description: 'far from every name of ours', name: 'HOSTNAME' },
    { description: 'the test suite\'s', name: 'DATABASE_URL_TEST' },
    { description: 'a Kubernetes service link', name: 'REDIS_PORT' },
    { description: 'the shell\'s', name: 'PATH' },
  ])('leaves alone $description: $name', ({ name }) => {
    expect(only(name)).toEqual([]);
  });

  it('never takes one of our variables for a misspelling of another', () => {
    const ours = Object.fromEntries(Object.keys(envSchema.shape).map((name) => [name, 'x']));
    expect(misspelledVariables(ours)).toEqual([]);
  });

  it('reports each in name order, and its line names both variables and no value', () => {
    const found = misspelledVariables({ REDIS_ULR: 'redis://:secret@cache', PROT: '8081', HOME: '/root' });
    expect(found).toEqual([
      { variable: 'PROT', meant: 'PORT' },
      { variable: 'REDIS_ULR', meant: 'REDIS_URL' },
    ]);
    expect(found.map(describeMisspelling)).toEqual([
      'PROT is not a Gatehouse variable and is ignored; did you mean PORT?',
      'REDIS_ULR is not a Gatehouse variable and is ignored; did you mean REDIS_URL?',
    ]);
  });
});
