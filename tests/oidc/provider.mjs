// A real OpenID provider for the sign-in tests: oidc-provider (a certified
// implementation) on 127.0.0.1, with one confidential client and a few
// people. Its development login and consent pages take any password; the
// login names it knows are the PEOPLE below.
//
//   node tests/oidc/provider.mjs --port 0 --client-id yeaft --client-secret S \
//        --redirect-uri http://127.0.0.1:8765/api/auth/oidc/callback
//
// prints "issuer http://127.0.0.1:PORT" once it listens, then serves until
// it is stopped (SIGTERM).
import { parseArgs } from 'node:util';
import Provider from 'oidc-provider';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    'client-id': { type: 'string' },
    'client-secret': { type: 'string' },
    'redirect-uri': { type: 'string', multiple: true },
  },
});

const PEOPLE = {
  alice: { email: 'alice@example.com', email_verified: true, name: 'Alice Example', preferred_username: 'alice', groups: ['staff', 'yeaft-admins'] },
  bob: { email: 'bob@other.test', email_verified: true, name: 'Bob Other', preferred_username: 'bob', groups: ['staff'] },
  // Goes by a name that is already an account of the server under test.
  mallory: { email: 'mallory@example.com', email_verified: true, name: 'Mallory', preferred_username: 'admin' },
};

function configuration() {
  return {
    clients: [
      {
        client_id: values['client-id'],
        client_secret: values['client-secret'],
        redirect_uris: values['redirect-uri'],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_basic',
      },
    ],
    pkce: { required: () => true },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name', 'preferred_username', 'groups'],
    },
    conformIdTokenClaims: false,
    features: { devInteractions: { enabled: true } },
    cookies: { keys: ['yeaft-test-provider-cookie-key-0123456789'] },
    async findAccount(ctx, id) {
      const person = PEOPLE[id];
      if (!person) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, ...person }) };
    },
  };
}

const server = (await import('node:http')).createServer();
server.listen(Number(values.port), '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, configuration());
  server.on('request', provider.callback());
  console.log(`issuer ${issuer}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
