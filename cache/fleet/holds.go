package fleet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Holds keeps each pace group's hold state for the fleet: a
// pace.SharedHolds. The state is opaque bytes the pace package encodes;
// Redis keeps it with a version under <prefix>hold:<group> (a hash), sets
// it only when the version is still the one the writer read, and
// publishes each state stored on the channel <prefix>holds, which every
// instance watches to mirror the fleet's holds.
type Holds struct {
	c *Client
}

// Holds returns the fleet's hold states.
func (c *Client) Holds() *Holds { return &Holds{c: c} }

// MaxHoldBytes bounds a group and a state: Store refuses a longer one and
// Watch ignores it, as whoever else writes to Redis may send anything.
const MaxHoldBytes = 4 << 10

// maxVersion is the largest version: below 2^53, so that the script's
// cur+1 is exact in a Lua number (a double), and two Stores on one version
// never store the same one.
const maxVersion = 1<<53 - 1

// The fields of a hold's hash.
const (
	holdFieldVersion = "v"
	holdFieldState   = "s"
)

// holdMessageTag starts every message on the channel: a message of
// another layout (another release, another program) is ignored.
const holdMessageTag = "v1:"

// holdLua reads a hold's version the way Load does: a hash whose version
// is not a decimal of 1 to 2^53-1, or whose state is missing or too long,
// is someone else's and counts as absent.
const holdLua = `
local function version(key)
  local r = redis.pcall('HMGET', key, 'v', 's')
  if type(r) ~= 'table' then return 0 end
  local v, s = r[1], r[2]
  if type(v) ~= 'string' or type(s) ~= 'string' or #s > 4096 then return 0 end
  if #v > 16 or not string.find(v, '^[1-9]%d*$') then return 0 end
  -- As strings: from 2^53 on, tonumber may round.
  if #v == 16 and v >= '9007199254740992' then return 0 end
  return tonumber(v)
end
`

// holdStoreScript stores ARGV[2] as the state of the hold KEYS[1] when its
// version is still ARGV[1], for ARGV[3] milliseconds, and publishes
// ARGV[4] on the channel ARGV[5]; it returns 1 when stored. The new version
// is at least Redis's clock in microseconds, so that versions only grow,
// across an expiry too: a version read before the key expired never
// matches one stored after. Past 2^53-1, which only a writer other than
// robotsgate reaches, it starts again from the clock: stored, 2^53 would
// read as absent, for a Store on version 0 to overwrite. A script is not
// undone when a command fails: PUBLISH comes first, so that a user whose
// ACL lacks the channel stores nothing the others would not hear of; no
// one sees the message before the script ends.
const holdStoreScript = holdLua + `
local cur = version(KEYS[1])
if cur ~= tonumber(ARGV[1]) then return 0 end
local t = redis.call('TIME')
local nv = cur + 1
if nv > 9007199254740991 then nv = 0 end
nv = math.max(nv, tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('PUBLISH', ARGV[5], ARGV[4])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'v', string.format('%.0f', nv), 's', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`

func (h *Holds) key(group string) string { return h.c.prefix + "hold:" + group }
func (h *Holds) channel() string         { return h.c.prefix + "holds" }

// Load returns group's state as stored and its version; nil and 0 when
// there is none, or when what Redis holds is not a hold Store wrote.
func (h *Holds) Load(ctx context.Context, group string) (state []byte, version int64, err error) {
	if err := checkGroup(group); err != nil {
		return nil, 0, err
	}
	err = h.c.do(ctx, opHoldLoad, func(ctx context.Context) error {
		fields, err := h.c.rdb.HMGet(ctx, h.key(group), holdFieldVersion, holdFieldState).Result()
		if redis.HasErrorPrefix(err, "WRONGTYPE") {
			return nil
		}
		if err != nil {
			return err
		}
		state, version = decodeHold(fields)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return state, version, nil
}

// Store sets group's state when its version is still version (0: there
// is none), the key expiring after keep (at least a millisecond, rounded
// up), and publishes (group, state) to every Watch in the same step;
// stored is false when another instance stored first. A group or state
// longer than MaxHoldBytes, or an empty group, is refused.
func (h *Holds) Store(ctx context.Context, group string, state []byte, version int64, keep time.Duration) (stored bool, err error) {
	if err := checkGroup(group); err != nil {
		return false, err
	}
	if len(state) > MaxHoldBytes {
		return false, fmt.Errorf("hold state of %q is %d bytes, more than %d", group, len(state), MaxHoldBytes)
	}
	if version < 0 || version > maxVersion {
		return false, fmt.Errorf("hold version %d of %q is not one Load returns", version, group)
	}
	err = h.c.do(ctx, opHoldStore, func(ctx context.Context) error {
		n, err := h.c.scripts.holdStore.Run(ctx, h.c.rdb, []string{h.key(group)},
			version, state, ceilMillis(keep).Milliseconds(), encodeHoldMessage(group, state), h.channel()).Int()
		stored = n == 1
		return err
	})
	if err != nil {
		return false, err
	}
	return stored, nil
}

// Watch calls apply with every state any instance stores (its own
// included), in the order Redis stored them, until ctx ends or the Client
// closes. It listens on a connection of its own, not one of the pool the
// operations share. When that connection fails, or stays silent past a
// PING, Watch subscribes again every RetryEvery until Redis answers; a
// state stored while it was not listening is not replayed. A message that
// is not a hold Store published is ignored.
func (h *Holds) Watch(ctx context.Context, apply func(group string, state []byte)) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.c.stopCtx, cancel)()
	pause := time.NewTimer(0)
	defer pause.Stop()
	warned := ""
	for {
		err := h.listen(ctx, apply)
		if ctx.Err() != nil {
			return
		}
		// Redis refusing (an ACL without the channel) will not mend by
		// itself, unlike a Redis away, which the Client reports already.
		if rerr, ok := errors.AsType[redis.Error](err); ok && rerr.Error() != warned {
			warned = rerr.Error()
			h.c.log.Warn(msgWatchRefused, "addr", h.c.addr, "channel", h.channel(), "err", err)
		}
		h.c.log.Debug("hold watch: subscribing again", "channel", h.channel(), "in", h.c.every.String(), "err", err)
		pause.Reset(h.c.every)
		select {
		case <-ctx.Done():
			return
		case <-pause.C:
		}
	}
}

// msgWatchRefused is logged when Redis refuses Watch its channel.
const msgWatchRefused = "redis refuses robotsgate the holds channel: this instance does not hear of the fleet's holds; let its user subscribe to the channel"

// listen subscribes to the channel and applies what arrives until the
// subscription fails or ctx ends.
func (h *Holds) listen(ctx context.Context, apply func(group string, state []byte)) error {
	ps := h.c.rdb.Subscribe(ctx)
	defer ps.Close()
	// A receive blocks on the connection: closing it is what ends one.
	defer context.AfterFunc(ctx, func() { _ = ps.Close() })()
	if err := ps.Subscribe(ctx, h.channel()); err != nil {
		return fmt.Errorf("subscribing: %w", err)
	}
	pinged := false
	for {
		wait := h.c.every
		if pinged {
			wait = h.c.timeout
		}
		msg, err := ps.ReceiveTimeout(ctx, wait)
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			pinged = false
			if m, ok := msg.(*redis.Message); ok {
				h.deliver(m.Payload, apply)
			}
		case !pinged && isTimeout(err):
			// A connection that died without a word (a host gone, a
			// network cut) is as quiet as an idle one: Redis must answer.
			if err := ps.Ping(ctx); err != nil {
				return fmt.Errorf("pinging: %w", err)
			}
			pinged = true
		default:
			return fmt.Errorf("receiving: %w", err)
		}
	}
}

// deliver passes a message's hold to apply, unless it is malformed.
func (h *Holds) deliver(payload string, apply func(group string, state []byte)) {
	group, state, ok := decodeHoldMessage(payload)
	if !ok {
		h.c.holdMessages[holdIgnored].Add(1)
		return
	}
	h.c.holdMessages[holdApplied].Add(1)
	apply(group, state)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func checkGroup(group string) error {
	switch {
	case group == "":
		return errors.New("hold group is empty")
	case len(group) > MaxHoldBytes:
		return fmt.Errorf("hold group is %d bytes, more than %d", len(group), MaxHoldBytes)
	}
	return nil
}

// decodeHold reads back the fields (version, state) Store wrote; a hold of
// any other shape is none, as holdLua reads it.
func decodeHold(fields []any) (state []byte, version int64) {
	if len(fields) != 2 {
		return nil, 0
	}
	v, okV := fields[0].(string)
	s, okS := fields[1].(string)
	if !okV || !okS || len(s) > MaxHoldBytes {
		return nil, 0
	}
	version, ok := parseVersion(v)
	if !ok {
		return nil, 0
	}
	return []byte(s), version
}

// parseVersion reads a decimal of 1 to 2^53-1 without sign or leading zero.
func parseVersion(v string) (int64, bool) {
	if len(v) == 0 || len(v) > 16 || v[0] < '1' || v[0] > '9' || strings.IndexFunc(v, notDigit) >= 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil && n <= maxVersion
}

func notDigit(r rune) bool { return r < '0' || r > '9' }

// encodeHoldMessage is what Store publishes: the tag, the group's length
// in decimal and a colon, the group, then the state to the end.
func encodeHoldMessage(group string, state []byte) []byte {
	b := make([]byte, 0, len(holdMessageTag)+5+len(group)+len(state))
	b = append(b, holdMessageTag...)
	b = strconv.AppendInt(b, int64(len(group)), 10)
	b = append(b, ':')
	b = append(b, group...)
	return append(b, state...)
}

// decodeHoldMessage reads what encodeHoldMessage wrote; ok is false for
// anything else, or for a group or state past MaxHoldBytes.
func decodeHoldMessage(msg string) (group string, state []byte, ok bool) {
	rest, ok := strings.CutPrefix(msg, holdMessageTag)
	if !ok {
		return "", nil, false
	}
	digits, rest, ok := strings.Cut(rest, ":")
	// Four digits hold MaxHoldBytes; a leading zero is not what Store writes.
	if !ok || len(digits) == 0 || len(digits) > 4 || digits[0] == '0' || strings.IndexFunc(digits, notDigit) >= 0 {
		return "", nil, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n > MaxHoldBytes || n > len(rest) || len(rest)-n > MaxHoldBytes {
		return "", nil, false
	}
	return rest[:n], []byte(rest[n:]), true
}
