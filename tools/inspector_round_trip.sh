#!/usr/bin/env bash
# Every MCP tool through an independent client, the MCP Inspector's CLI (npm), over stdio and over HTTP.
#   tools/inspector_round_trip.sh            # needs npx and `worlddb` (with the mcp extra) on PATH
# Each call must answer without isError and hold what it is checked for. The Inspector's CLI (0.15) sends no
# headers, so the HTTP run is the loopback one without a token (tests/test_mcp_http.py drives the token).
set -euo pipefail

folder=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$folder"' EXIT

inspector() { npx -y @modelcontextprotocol/inspector@0.15.0 --cli "$@"; }

round_trip() {  # $1: how to reach the server (a command line, or a URL and --transport http)
  local -a target=($1)
  call() {  # tool, then key=value arguments; prints the answer, fails on a tool error
    local tool=$1
    shift
    local -a pairs=()
    for pair in "$@"; do pairs+=(--tool-arg "$pair"); done
    local answer
    answer=$(inspector "${target[@]}" --method tools/call --tool-name "$tool" "${pairs[@]}")
    if grep -q '"isError": true' <<<"$answer"; then
      echo "$tool failed: $answer" >&2
      return 1
    fi
    printf '%s' "$answer"
  }
  id_of() { grep -o '\\"id\\":\\"[0-9a-f]*' <<<"$1" | head -1 | grep -o '[0-9a-f]*$'; }

  listed=$(inspector "${target[@]}" --method tools/list)
  for tool in memory_write memory_add_turn memory_recall memory_context memory_list memory_read memory_amend \
      memory_retire memory_purge memory_list_scopes memory_links memory_stats; do
    grep -q "\"$tool\"" <<<"$listed" || { echo "$tool is not listed" >&2; return 1; }
  done
  key=$(id_of "$(call memory_write 'text=The spare key is under the blue flowerpot' scope=ana)")
  [ -n "$key" ]
  call memory_write 'text=the dentist is on Friday at nine' scope=ana 'tags=["health"]' >/dev/null
  call memory_add_turn 'text=My sister Emma loves pottery' scope=ana speaker=ana >/dev/null
  grep -q 'blue flowerpot' <<<"$(call memory_recall 'query=where is the spare key?' scope=ana k=1)"
  grep -q 'dentist' <<<"$(call memory_recall 'query=when is the dentist?' scope=ana tag=health during=today)"
  grep -q 'flowerpot' <<<"$(call memory_context 'query=spare key' scope=ana budget=200)"
  grep -q 'memories' <<<"$(call memory_list scope=ana kind=note)"
  grep -q 'flowerpot' <<<"$(call memory_read "id=$key")"
  new=$(id_of "$(call memory_amend "id=$key" 'text=The spare key is with the neighbour')")
  grep -q 'versions' <<<"$(call memory_read "id=$new" history=true)"
  grep -q 'links' <<<"$(call memory_links about=Emma)"
  grep -q 'retired' <<<"$(call memory_retire scope=ana tag=health)"
  grep -q 'retired' <<<"$(call memory_retire "id=$new")"
  grep -q 'erased' <<<"$(call memory_purge "id=$key" "confirm=$key")"
  grep -q 'ana' <<<"$(call memory_list_scopes)"
  grep -q 'nodes' <<<"$(call memory_stats verify=true)"
}

round_trip "worlddb mcp $folder/stdio.db"
echo "stdio: every tool round-tripped through the MCP Inspector"

worlddb mcp "$folder/http.db" --http --port 0 2>"$folder/http.log" &
server=$!
for _ in $(seq 50); do grep -q 'http://' "$folder/http.log" 2>/dev/null && break; sleep 0.2; done
url=$(grep -o 'http://[^ ]*' "$folder/http.log" | head -1)
round_trip "$url --transport http"
echo "http: every tool round-tripped through the MCP Inspector"
