"use strict";
// The page of `spiral-arena web`: a game against or between agents, and the leaderboard, live.
// Every request goes to this server's /api (app.py); text from games and players is shown with
// textContent, never as HTML. The leaderboard sections come as HTML the server escaped.

const $ = (id) => document.getElementById(id);
let token = sessionStorage.getItem("spiral-arena-token") || "";
let games = [];
let match = null; // the state of the match shown, as the server sent it
let running = false; // watching: moves follow each other at the chosen pace
let busy = false;

async function api(path, body) {
  const headers = body === undefined ? {} : { "Content-Type": "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  const reply = await fetch(`/api/${path}`, body === undefined ? { headers } : {
    method: "POST", headers, body: JSON.stringify(body),
  });
  const data = await reply.json().catch(() => ({}));
  if (reply.status === 401) {
    $("token-form").hidden = false;
    $("token").focus();
  }
  if (!reply.ok) throw new Error((data.error && data.error.message) || `HTTP ${reply.status}`);
  return data;
}

function showError(error) {
  $("error").textContent = error ? String(error.message || error) : "";
  $("error").hidden = !error;
}

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

// An answer with each \boxed{...} (the move a model names) marked.
function answerNode(text) {
  const node = el("span", undefined, "answer");
  const pattern = /\\boxed\{[^{}]*\}/g;
  let last = 0;
  for (const found of text.matchAll(pattern)) {
    node.append(text.slice(last, found.index), el("mark", found[0]));
    last = found.index + found[0].length;
  }
  node.append(text.slice(last));
  return node;
}

function moveItem(who, text, observation) {
  const item = el("li");
  item.append(el("span", `${who}: `, "who"), answerNode(text));
  if (observation) {
    const details = el("details");
    details.append(el("summary", "what it read"), el("pre", observation));
    item.append(details);
  }
  return item;
}

// -- tabs -----------------------------------------------------------------------------------------

function select(tab) {
  for (const name of ["match", "board"]) {
    const on = name === tab;
    $(`tab-${name}`).setAttribute("aria-selected", String(on));
    $(`view-${name}`).hidden = !on;
  }
  if (tab === "board") refreshBoard();
}

// -- a match --------------------------------------------------------------------------------------

function seatInputs() {
  const game = games.find((g) => g.id === $("game").value);
  const seats = $("seats");
  const before = [...seats.querySelectorAll("input")].map((i) => i.value);
  seats.replaceChildren();
  const defaults = ["human", "expert"];
  for (let seat = 0; seat < (game ? game.players : 2); seat++) {
    const label = el("label", `Seat ${seat} `);
    const input = el("input");
    input.id = `seat-${seat}`;
    input.size = 16;
    input.setAttribute("list", "agent-specs");
    input.value = before[seat] || defaults[seat];
    label.append(input);
    seats.append(label);
  }
  if (game) {
    const options = Object.entries(game.options).map(([k, v]) => `${k}=${v}`).join("; ");
    $("game-options").textContent = options ? `Options and their defaults: ${options}` : "This game has no options.";
  }
}

async function startMatch(event) {
  event.preventDefault();
  showError(null);
  const options = $("options").value.trim();
  const seats = [...$("seats").querySelectorAll("input")].map((i) => i.value.trim());
  const body = { game: options ? `${$("game").value}:${options}` : $("game").value, seats };
  // the seed as typed, a string: a Number would round one above 2**53 (12345678901234567891 -> ...7000)
  if ($("seed").value.trim()) body.seed = $("seed").value.trim();
  stop();
  try {
    $("start").disabled = true;
    show(await api("matches", body));
    advance();
  } catch (error) {
    showError(error);
  } finally {
    $("start").disabled = false;
  }
}

function show(state) {
  if (!match || match.id !== state.id) $("reads").open = !state.board; // with a board, the text is one click away
  match = state;
  $("match").hidden = false;
  const seats = state.seats.map((s) => `${s.label} (${s.player})`).join(" vs ");
  $("match-title").textContent = `${state.game}, seed ${state.seed}: ${seats}`;
  $("match-notes").replaceChildren(...state.notes.map((n) => el("li", n)));
  $("transcript").replaceChildren(...state.moves.map((m) => moveItem(`${m.label} (${m.player})`, m.text, m.observation)));
  const turn = state.turn;
  const human = turn && turn.human;
  const watching = !state.seats.some((s) => s.human);
  $("watch-controls").hidden = !watching || state.over;
  $("your-turn").hidden = !human;
  $("waiting").hidden = !turn || human || watching;
  drawBoard(state);
  if (turn && !human) $("waiting").textContent = `${turn.label} (${turn.player}) is thinking...`;
  if (human) {
    $("turn-title").textContent = `Your turn (${turn.player}, seat ${turn.seat})`;
    $("observation").textContent = turn.observation;
    const legal = turn.legal_actions || [];
    $("legal").replaceChildren(...legal.map((action) => {
      const button = el("button", action);
      button.type = "button";
      button.addEventListener("click", () => sendMove(action));
      return button;
    }));
    $("move-text").placeholder = turn.action_format || (legal.length ? `e.g. ${legal[0]}` : "your message");
  }
  const result = $("result");
  result.hidden = !state.over;
  if (state.over) {
    const r = state.result;
    result.className = r.error ? "error" : "";
    result.replaceChildren();
    if (r.error) result.append(el("p", `Stopped: ${r.error}`));
    state.seats.forEach((s, seat) => {
      const reward = r.rewards[seat] === null ? "" : ` (reward ${r.rewards[seat]})`;
      result.append(el("p", `${s.label} (${s.player})${reward}: ${r.ends[seat]}`));
    });
    if (r.invalid) result.append(el("p", `Invalid move: ${r.invalid}`));
    if (state.stored) {
      const how = state.stored.new ? "Stored" : "Already stored (same players and seed)";
      result.append(el("p", `${how} in ${state.stored.db} as game #${state.stored.id}.`));
    } else if (state.pending) {  // the database was busy: the server keeps the row; ask again until it is written
      result.append(el("p", `Not stored yet: ${state.pending}`));
      const id = state.id;
      setTimeout(() => { if (match && match.id === id) api(`matches/${id}`).then(show, showError); }, 2000);
    }
    stop();
  }
}

async function sendMove(text) {
  if (!match || busy) return;
  showError(null);
  busy = true;
  try {
    show(await api(`matches/${match.id}/move`, { text, at: match.moves.length }));
    $("move-text").value = "";
  } catch (error) {
    showError(error);
  } finally {
    busy = false;
  }
  advance();
}

async function step() {
  if (!match || busy || match.over || !match.turn || match.turn.human) return false;
  busy = true;
  try {
    show(await api(`matches/${match.id}/step`, { at: match.moves.length }));
    return true;
  } catch (error) {
    showError(error);
    stop();
    return false;
  } finally {
    busy = false;
  }
}

// After a person's move, or as a match starts, the agents answer until it is a person's turn again.
// Between two agents nothing moves until Step or Play.
async function advance() {
  const watching = match && !match.seats.some((s) => s.human);
  if (watching) return;
  while (match && !match.over && match.turn && !match.turn.human) {
    if (!(await step())) return;
  }
  if (match && match.turn && match.turn.human) {
    const first = $("grid").querySelector("button") || $("legal").querySelector("button");
    (first || $("move-text")).focus();
  }
}

async function play() {
  running = true;
  $("run").textContent = "Pause";
  $("run").setAttribute("aria-pressed", "true");
  while (running && match && !match.over) {
    if (!(await step())) break;
    await new Promise((done) => setTimeout(done, Number($("pace").value)));
  }
  stop();
}

function stop() {
  running = false;
  $("run").textContent = "Play";
  $("run").setAttribute("aria-pressed", "false");
}

// -- a board --------------------------------------------------------------------------------------

// The board of a game that has one (state.board, from leaderboard/web/boards.py): each cell's mark, the
// last move outlined, and on a person's turn a button on each cell (or column) a legal action lands on,
// which sends that action's text as the env listed it: the page never makes up a move.
function drawBoard(state) {
  const board = state.board;
  $("match-board").hidden = !board;
  if (!board) {
    $("grid").replaceChildren();
    return;
  }
  const playable = Boolean(state.turn && state.turn.human);
  const columns = board.click === "column";
  const actions = new Map(playable ? board.actions.map((a) => [columns ? `${a.col}` : `${a.row},${a.col}`, a.text]) : []);
  const last = new Set(board.last.map(([row, col]) => `${row},${col}`));
  const cell = (row, col) => {
    const action = columns ? undefined : actions.get(`${row},${col}`);
    const mark = board.cells[row][col];
    const node = el(action ? "button" : "span", mark, "cell");
    Object.assign(node.dataset, { row, col, mark });
    if (last.has(`${row},${col}`)) {
      node.classList.add("last");
      node.title = "the last move";
    }
    if (action) moveButton(node, action);
    return node;
  };
  const lines = [];
  for (let i = 0; i < (columns ? board.cols : board.rows); i++) {
    const action = columns ? actions.get(`${i}`) : undefined;
    const line = el(action ? "button" : "div", undefined, "line");
    for (let j = 0; j < (columns ? board.rows : board.cols); j++) line.append(columns ? cell(j, i) : cell(i, j));
    if (columns) line.dataset.col = i;
    if (action) moveButton(line, action);
    lines.push(line);
  }
  Object.assign($("grid").dataset, { game: board.game, click: board.click });
  $("grid").replaceChildren(...lines);
  const marks = state.seats.map((s, seat) => `${s.label} (${s.player}) plays ${board.seats[seat]}`).join(", ");
  const how = !playable ? "" : columns ? " Click a column to drop your piece there." : " Click a cell to move there.";
  $("grid-caption").textContent = `${marks}. The last move is outlined.${how}`;
}

function moveButton(node, action) {
  node.type = "button";
  node.dataset.action = action;
  node.setAttribute("aria-label", `Play ${action}`);
  node.addEventListener("click", () => sendMove(action));
}

// -- the leaderboard ------------------------------------------------------------------------------

let boardGames = -1;

async function refreshBoard() {
  if ($("view-board").hidden) return;
  try {
    const board = await api("leaderboard");
    const when = new Date().toLocaleTimeString();
    $("board-status").textContent = board.missing
      ? board.missing
      : `${board.games} games stored in ${board.db}; updated ${when}, every 2 s.`;
    if (board.games !== boardGames) {
      boardGames = board.games;
      $("board").innerHTML = board.html; // escaped by the server (leaderboard.report)
    }
  } catch (error) {
    showError(error);
  }
}

async function listStored(event) {
  if (event) event.preventDefault();
  const query = new URLSearchParams();
  if ($("stored-game").value.trim()) query.set("game", $("stored-game").value.trim());
  if ($("stored-agent").value.trim()) query.set("agent", $("stored-agent").value.trim());
  try {
    const { games: rows } = await api(`stored?${query}`);
    $("stored").tBodies[0].replaceChildren(...rows.map((g) => {
      const row = el("tr");
      const result = g.error ? "error" : g.player1 ? `${g.reward0} : ${g.reward1}` : `${g.reward0}`;
      for (const cell of [g.id, g.env_id, g.player0, g.player1, g.seed, result, g.finished_at]) {
        row.append(el("td", String(cell)));
      }
      const open = el("button", "Transcript");
      open.type = "button";
      open.addEventListener("click", () => openStored(g.id));
      const cell = el("td");
      cell.append(open);
      row.append(cell);
      return row;
    }));
  } catch (error) {
    showError(error);
  }
}

async function openStored(id) {
  try {
    const g = await api(`stored/${id}`);
    const seats = g.player1 ? [g.player0, g.player1] : [g.player0];
    $("stored-title").textContent = `Game #${g.id}: ${g.env_id}, seed ${g.seed}, ${seats.join(" vs ")}`;
    $("stored-transcript").replaceChildren(...g.transcript.moves.map(([seat, text]) => moveItem(seats[seat], text)));
    const end = g.error ? `Stopped: ${g.error}` : g.transcript.end || "";
    $("stored-end").textContent = g.invalid_reason ? `${end} (invalid move: ${g.invalid_reason})` : end;
    $("stored-game-view").hidden = false;
    $("stored-title").scrollIntoView();
  } catch (error) {
    showError(error);
  }
}

// A click on a standings row lists that agent's games of that table (the overall table: of every game).
function boardClick(event) {
  const row = event.target.closest("tbody tr");
  const section = event.target.closest("section[data-scope]");
  if (!row || !section || !row.closest("table.sortable")) return;
  const scope = section.dataset.scope;
  $("stored-game").value = scope === "overall" ? "" : scope;
  $("stored-agent").value = row.cells[1].textContent.replace(/[^\w\-.:=#/@ ]+$/u, "").trim();
  listStored();
}

// -- start ----------------------------------------------------------------------------------------

async function load() {
  const specs = el("datalist");
  specs.id = "agent-specs";
  for (const spec of ["human", "expert", "random"]) specs.append(new Option(spec));
  document.body.append(specs);
  try {
    const listed = await api("games");
    games = listed.games;
    for (const name of listed.agents) specs.append(new Option(name)); // the server's own (--agents)
    $("game").replaceChildren(...games.map((g) => new Option(g.id, g.id)));
    seatInputs();
  } catch (error) {
    showError(error);
  }
}

$("tab-match").addEventListener("click", () => select("match"));
$("tab-board").addEventListener("click", () => select("board"));
$("game").addEventListener("change", seatInputs);
$("new-match").addEventListener("submit", startMatch);
$("move-form").addEventListener("submit", (event) => {
  event.preventDefault();
  if ($("move-text").value.trim()) sendMove($("move-text").value);
});
$("step").addEventListener("click", step);
$("run").addEventListener("click", () => (running ? stop() : play()));
$("stored-filter").addEventListener("submit", listStored);
$("board").addEventListener("click", boardClick);
$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  token = $("token").value;
  sessionStorage.setItem("spiral-arena-token", token);
  $("token-form").hidden = true;
  load();
});
setInterval(refreshBoard, 2000);
load();
