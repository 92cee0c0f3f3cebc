// A complete Spielbus bot in Go with nats.go, nothing of Spielbus imported: only the protocol
// (docs/protocol.md). It builds with Debian 12's packages alone, no module download:
//
//	apt-get install golang-go golang-github-nats-io-go-nats-dev
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o go_bot ./examples/bots/go_bot
//	NATS_URL=nats://127.0.0.1:4222 ./go_bot --name gobot
//
// Debian's nats.go (1.22) has an early `micro` package that hard-codes queue group "q" and answers
// $SRV.INFO without the `endpoints` list Spielbus reads (docs/protocol.md, "Client traps"), so this
// bot does the micro-service part itself: its turn subscription is in queue group <name>, and it
// answers $SRV.PING, $SRV.INFO and $SRV.STATS (every replica answers those: no queue group) in the
// micro v1 format. With nats.go 1.30 or later, `micro.AddService` with `QueueGroup: name` does all
// of that instead.
//
// Strategy: tic-tac-toe played perfectly (the board is the turn's `state` replayed: an id is a
// cell, row*3+col; a full minimax over what is left); any other game: a random legal action.
// Credentials: --login FILE (KEY=VALUE lines: NATS_URL, NATS_USER, NATS_PASSWORD), else the
// environment: NATS_USER / NATS_PASSWORD or NATS_CREDS.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

const protocolVersion = 1

type legalAction struct {
	ID   *int   `json:"id"`
	Text string `json:"text"`
}

// The fields of a turn this bot reads; every other field is ignored (newer referees add some).
type turn struct {
	V            *int                  `json:"v"`
	Type         string                `json:"type"`
	MatchID      string                `json:"match_id"`
	Turn         *int                  `json:"turn"`
	Game         struct{ Name string } `json:"game"`
	LegalActions []legalAction         `json:"legal_actions"`
	State        []int                 `json:"state"`
	Retry        string                `json:"retry"`
}

type move struct {
	V       int    `json:"v"`
	Type    string `json:"type"`
	MatchID string `json:"match_id"`
	Turn    int    `json:"turn"`
	Action  int    `json:"action"`
	Note    string `json:"note,omitempty"`
}

// The micro-service identity and counters behind $SRV.PING / INFO / STATS.
type service struct {
	name, id, subject, started string
	metadata                   map[string]string
	mu                         sync.Mutex
	requests, errors           int
	processing                 time.Duration
	lastError                  string
}

func (s *service) identity(kind string) map[string]any {
	return map[string]any{
		"type": "io.nats.micro.v1." + kind, "name": s.name, "id": s.id, "version": "1.0.0",
		"metadata": s.metadata,
	}
}

func (s *service) endpoint() map[string]any {
	return map[string]any{"name": "turn", "subject": s.subject, "queue_group": s.name, "metadata": nil}
}

func (s *service) answerControl(m *nats.Msg) {
	var out map[string]any
	switch strings.Split(m.Subject, ".")[1] {
	case "PING":
		out = s.identity("ping_response")
	case "INFO":
		out = s.identity("info_response")
		out["description"] = "example Spielbus bot in Go"
		out["endpoints"] = []any{s.endpoint()}
	case "STATS":
		out = s.identity("stats_response")
		out["started"] = s.started
		ep := s.endpoint()
		s.mu.Lock()
		ep["num_requests"], ep["num_errors"], ep["last_error"] = s.requests, s.errors, s.lastError
		ep["processing_time"] = s.processing.Nanoseconds()
		avg := time.Duration(0)
		if s.requests > 0 {
			avg = s.processing / time.Duration(s.requests)
		}
		ep["average_processing_time"] = avg.Nanoseconds()
		s.mu.Unlock()
		out["endpoints"] = []any{ep}
	default:
		return
	}
	data, _ := json.Marshal(out)
	_ = m.Respond(data)
}

func (s *service) count(start time.Time, errText string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	s.processing += time.Since(start)
	if errText != "" {
		s.errors++
		s.lastError = errText
	}
}

// Perfect tic-tac-toe: negamax over the board the `state` ids build (cell = row*3+col, x first).
var lines = [8][3]int{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {0, 3, 6}, {1, 4, 7}, {2, 5, 8}, {0, 4, 8}, {2, 4, 6}}

func won(b *[9]int, p int) bool {
	for _, l := range lines {
		if b[l[0]] == p && b[l[1]] == p && b[l[2]] == p {
			return true
		}
	}
	return false
}

// The value of the position for `p` to move: 1 win, 0 draw, -1 loss.
func negamax(b *[9]int, p int) int {
	best, moved := -2, false
	for c := 0; c < 9; c++ {
		if b[c] != 0 {
			continue
		}
		moved = true
		b[c] = p
		v := 1
		if !won(b, p) {
			v = -negamax(b, 3-p)
		}
		b[c] = 0
		if v > best {
			best = v
		}
	}
	if !moved {
		return 0
	}
	return best
}

func ticTacToe(state []int, legal []legalAction) (int, bool) {
	var b [9]int
	for i, c := range state {
		if c < 0 || c > 8 || b[c] != 0 {
			return 0, false
		}
		b[c] = i%2 + 1
	}
	me, best, bestValue := len(state)%2+1, -1, -2
	for _, a := range legal {
		c := *a.ID
		if c < 0 || c > 8 || b[c] != 0 {
			return 0, false
		}
		b[c] = me
		v := 1
		if !won(&b, me) {
			v = -negamax(&b, 3-me)
		}
		b[c] = 0
		if v > bestValue {
			best, bestValue = c, v
		}
	}
	return best, best >= 0
}

func choose(t *turn, rng *rand.Rand) (int, string) {
	if t.Game.Name == "tic_tac_toe" && t.State != nil {
		if a, ok := ticTacToe(t.State, t.LegalActions); ok {
			return a, "minimax"
		}
	}
	return *t.LegalActions[rng.Intn(len(t.LegalActions))].ID, "random"
}

func readTurn(data []byte) (*turn, error) {
	var t turn
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	if t.Type != "turn" || t.Turn == nil || t.MatchID == "" || len(t.LegalActions) == 0 {
		return nil, fmt.Errorf("not a turn with legal actions")
	}
	if t.V == nil || *t.V != protocolVersion { // never guess at another version's meaning
		v := "null"
		if t.V != nil {
			v = fmt.Sprint(*t.V)
		}
		return nil, fmt.Errorf("protocol version %s not spoken; this bot speaks 1", v)
	}
	for _, a := range t.LegalActions {
		if a.ID == nil {
			return nil, fmt.Errorf("a legal action without an id")
		}
	}
	return &t, nil
}

func respondError(m *nats.Msg, code, text string) {
	reply := nats.NewMsg(m.Reply)
	reply.Header.Set("Nats-Service-Error", text)
	reply.Header.Set("Nats-Service-Error-Code", code)
	_ = m.RespondMsg(reply)
}

func readLogin(path string) map[string]string {
	out := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		log.Fatalf("login file: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

func main() {
	name := flag.String("name", "go_bot", "agent name")
	url := flag.String("nats", "", "NATS URL (default: the login file's, $NATS_URL, local)")
	prefix := flag.String("prefix", "spielbus", "subject prefix")
	login := flag.String("login", "", "login file: KEY=VALUE lines")
	flag.Parse()
	env := func(k string) string { return os.Getenv(k) }
	if *login != "" {
		file := readLogin(*login) // the file wins over the environment
		env = func(k string) string {
			if v, ok := file[k]; ok {
				return v
			}
			return os.Getenv(k)
		}
	}
	servers := *url
	if servers == "" {
		servers = env("NATS_URL")
	}
	if servers == "" {
		servers = nats.DefaultURL
	}
	opts := []nats.Option{
		nats.Name("bot-" + *name),
		nats.MaxReconnects(-1),
		// Permission violations and other async errors are reported here, not swallowed.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { log.Printf("nats: %v", err) }),
	}
	if creds := env("NATS_CREDS"); creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	if user := env("NATS_USER"); user != "" {
		opts = append(opts, nats.UserInfo(user, env("NATS_PASSWORD")))
	}
	nc, err := nats.Connect(servers, opts...) // a comma-separated list of a cluster's servers works too
	if err != nil {
		log.Fatalf("connect: %v", err)
	}

	svc := &service{
		name: *name, id: nuid.Next(), subject: *prefix + ".turn." + *name,
		started:  time.Now().UTC().Format(time.RFC3339Nano),
		metadata: map[string]string{"kind": "example-go", "games": "*", "protocol": fmt.Sprint(protocolVersion)},
	}
	var inFlight sync.WaitGroup
	var rngMu sync.Mutex
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	var matchesMu sync.Mutex
	matches := map[string]json.RawMessage{} // per-match state, keyed by match id

	answer := func(m *nats.Msg) {
		defer inFlight.Done()
		start := time.Now()
		t, err := readTurn(m.Data)
		if err != nil {
			text := "cannot play this turn: " + err.Error()
			respondError(m, "400", text)
			svc.count(start, text)
			return
		}
		if t.Retry != "" {
			log.Printf("match %s: previous answer refused: %s", t.MatchID, t.Retry)
		}
		rngMu.Lock()
		action, how := choose(t, rng)
		rngMu.Unlock()
		data, _ := json.Marshal(move{
			V: protocolVersion, Type: "move", MatchID: t.MatchID,
			Turn:   *t.Turn, // echo the counter: a stale answer is refused
			Action: action, Note: how,
		})
		_ = m.Respond(data)
		svc.count(start, "")
	}
	// Queue group <name>: replicas of this bot share its turns. Each turn runs in its own goroutine,
	// so a slow decision does not hold up other matches (nats.go calls a handler one message at a time).
	turns, err := nc.QueueSubscribe(svc.subject, *name, func(m *nats.Msg) {
		inFlight.Add(1)
		go answer(m)
	})
	if err != nil {
		log.Fatalf("subscribe: %v", err)
	}
	notify, err := nc.Subscribe(*prefix+".notify."+*name, func(m *nats.Msg) {
		var note struct {
			Type    string `json:"type"`
			MatchID string `json:"match_id"`
		}
		if json.Unmarshal(m.Data, &note) != nil {
			return // not JSON: ignore
		}
		matchesMu.Lock()
		defer matchesMu.Unlock()
		switch note.Type {
		case "match_started":
			matches[note.MatchID] = json.RawMessage(m.Data)
		case "match_ended":
			delete(matches, note.MatchID)
		}
	})
	if err != nil {
		log.Fatalf("subscribe: %v", err)
	}
	for _, verb := range []string{"PING", "INFO", "STATS"} {
		for _, subject := range []string{"$SRV." + verb, "$SRV." + verb + "." + *name, "$SRV." + verb + "." + *name + "." + svc.id} {
			if _, err := nc.Subscribe(subject, svc.answerControl); err != nil {
				log.Fatalf("subscribe %s: %v", subject, err)
			}
		}
	}
	// The server has every subscription once this round trip is back: only then say ready.
	if err := nc.Flush(); err != nil {
		log.Fatalf("flush: %v", err)
	}
	log.Printf("bot %s serving %s", *name, svc.subject)
	fmt.Println("ready")

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	// Drain: stop taking turns, finish the ones in flight, then close.
	_ = turns.Drain()
	_ = notify.Unsubscribe()
	for turns.IsValid() {
		time.Sleep(10 * time.Millisecond)
	}
	inFlight.Wait()
	_ = nc.Drain()
	for !nc.IsClosed() {
		time.Sleep(10 * time.Millisecond)
	}
}
