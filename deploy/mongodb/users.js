// Least-privilege MongoDB users, one per process (security review #9): run once with
// mongosh as an administrator of the replica set, passing the passwords in the
// environment, e.g.
//   GATEWAY_PW=... WORKSPACE_PW=... EMBED_PW=... DBTSYNC_PW=... \
//     mongosh "mongodb://admin@mongo-0.example.net/?replicaSet=rs0&tls=true" deploy/mongodb/users.js
// then put each user's URI in platform-secrets (MONGODB_URI_GATEWAY, …). docker compose runs this
// file at MongoDB's first start (docker-entrypoint-initdb.d), with the passwords from .env. A process's
// user reaches its own database only: embed-svc asks the gateway for what it needs of the
// identity database (the identity lookup over NATS), and owns the audit trail's database
// (audit). Every service keeps its audit outbox in its own database. The dbt worker, which runs
// untrusted repositories, shares dbtsync-svc's database and user.
//
// readWrite does not include collMod, which embed-svc runs at start when AUDIT_RETENTION
// changed, to change the expiry of the audit events' TTL index (time_ttl): the role
// auditRetention grants that one action on that one collection. Roles are created or
// updated before the users that hold them; running the file again brings both to what
// it says.
const roles = [
  {
    role: 'auditRetention',
    privileges: [{ resource: { db: 'audit', collection: 'audit_events' }, actions: ['collMod'] }],
    roles: [],
  },
];
const users = [
  { user: 'platform-gateway', pwd: process.env.GATEWAY_PW, roles: [{ role: 'readWrite', db: 'identity' }] },
  { user: 'platform-workspace', pwd: process.env.WORKSPACE_PW, roles: [{ role: 'readWrite', db: 'workspace' }] },
  { user: 'platform-embed', pwd: process.env.EMBED_PW, roles: [{ role: 'readWrite', db: 'embed' }, { role: 'readWrite', db: 'audit' }, { role: 'auditRetention', db: 'admin' }] },
  { user: 'platform-dbtsync', pwd: process.env.DBTSYNC_PW, roles: [{ role: 'readWrite', db: 'dbtsync' }] },
];
const admin = db.getSiblingDB('admin');
for (const r of roles) {
  if (admin.getRole(r.role)) {
    admin.updateRole(r.role, { privileges: r.privileges, roles: r.roles });
  } else {
    admin.createRole(r);
  }
}
for (const u of users) {
  if (!u.pwd) throw new Error('missing password for ' + u.user);
  if (admin.getUser(u.user)) {
    admin.updateUser(u.user, { pwd: u.pwd, roles: u.roles });
  } else {
    admin.createUser(u);
  }
}
// Earlier versions let embed-svc read identity.users through this role; the users above no
// longer hold it, and it goes.
if (admin.getRole('identityUsersRead')) {
  admin.dropRole('identityUsersRead');
}
