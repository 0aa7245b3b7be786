// The quickstart's embed flow, as a customer's TypeScript backend and browser would run it,
// typed by what openapi-typescript generates from the platform's OpenAPI document (./api):
// mint a session with an account API key, exchange its single-use id for the session
// token, and use that token for a data-API token. Prints what it got as JSON; any answer
// other than the documented success ends it with an error.
import type { paths } from "./api";

type Json<Op, Status extends number> = Op extends { responses: { [S in Status]: { content: { "application/json": infer T } } } } ? T : never;
type Body<Op> = Op extends { requestBody: { content: { "application/json": infer T } } } ? T : never;

type Mint = paths["/api/v1/embed/generate-session"]["post"];
type Exchange = paths["/api/v1/embed/session/exchange"]["post"];
type DataToken = paths["/api/v1/deployments/{deploymentId}/token"]["post"];

const gateway = required("GATEWAY");
const apiKey = required("API_KEY");
const deploymentId = Number(required("DEPLOYMENT_ID"));

function required(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

async function post<T>(path: string, authorization: string | null, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  if (authorization) headers["Authorization"] = authorization;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(gateway + path, { method: "POST", headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status !== 200) throw new Error(`POST ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

async function main(): Promise<void> {
  const mint: Body<Mint> = {
    deploymentId,
    externalId: "viewer-42",
    userAttributes: [{ name: "region", value: "EMEA" }],
  };
  const minted = await post<Json<Mint, 200>>("/api/v1/embed/generate-session", `Api-Key ${apiKey}`, mint);
  if (minted.sessionId === undefined) throw new Error("generate-session answered without a sessionId");
  const exchange: Body<Exchange> = { sessionId: minted.sessionId };
  const session = await post<Json<Exchange, 200>>("/api/v1/embed/session/exchange", null, exchange);
  const path = `/api/v1/deployments/${deploymentId}/token` as const;
  const data = await post<Json<DataToken, 200>>(path, `Bearer ${session.token}`);
  const refreshIn: number = Date.parse(session.refreshAt) - Date.now();
  console.log(JSON.stringify({
    sessionToken: session.token.split(".").length === 3,
    expiresAt: session.expiresAt,
    refreshInHours: Math.round(refreshIn / 3_600_000),
    dataTokenId: data.tokenId,
    dataToken: data.token.split(".").length === 3,
    dataTokenExpiresAt: data.expiresAt,
  }));
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
