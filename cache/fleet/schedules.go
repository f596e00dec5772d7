package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Schedules keeps crawl schedules in Redis for the fleet: a
// pace.SharedSchedules. A schedule is one number under <prefix>pace:<key>,
// the earliest start of the next request in microseconds on Redis's own
// clock, so that the instances' clocks do not matter.
type Schedules struct {
	c *Client
}

// Schedules returns the fleet's crawl schedules.
func (c *Client) Schedules() *Schedules { return &Schedules{c: c} }

// scripts are the Lua scripts the Client runs, each one step done
// atomically; go-redis sends each by its SHA1, and whole when Redis has not
// seen it yet.
type scripts struct {
	take, giveBack, extend, release, holdStore *redis.Script
}

func newScripts() scripts {
	return scripts{
		take:      redis.NewScript(takeScript),
		giveBack:  redis.NewScript(giveBackScript),
		extend:    redis.NewScript(extendScript),
		release:   redis.NewScript(releaseScript),
		holdStore: redis.NewScript(holdStoreScript),
	}
}

// Numbers travel into redis.call as strings written with %.0f: Lua would
// write a number of 16 digits with 14 significant ones. A schedule that is
// not a number of at most 2^53 (exact in Lua's doubles) is someone else's
// and counts as absent; pcall reads a key of another type as absent too.
// Every SET carries PX, so a schedule disappears a second after it holds
// nothing back.
const scheduleLua = `
local function read(key)
  local v = redis.pcall('GET', key)
  if type(v) ~= 'string' then return nil end
  v = tonumber(v)
  if v == nil or v ~= v or v < 0 or v > 9007199254740992 then return nil end
  return v
end
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function store(key, due, t)
  local px = math.max(0, math.ceil((due - t) / 1000)) + 1000
  redis.call('SET', key, string.format('%.0f', due), 'PX', string.format('%.0f', px))
end
`

// takeScript is one GCRA step: KEYS[1] the schedule, ARGV[1] the interval
// and ARGV[2] the longest wait, in microseconds; it returns the start
// taken, how early it is, and 1 when taken.
const takeScript = scheduleLua + `
local interval, maxWait = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = now()
local due = read(KEYS[1])
if due == nil or due <= t then
  store(KEYS[1], t + interval, t)
  return {t, 0, 1}
end
local early = due - t
if early <= maxWait then
  store(KEYS[1], due + interval, t)
  return {due, early, 1}
end
return {due, early, 0}
`

// giveBackScript moves the schedule back to ARGV[1] when it is still where
// the Take of that start left it, ARGV[1] + ARGV[2].
const giveBackScript = scheduleLua + `
local slot, interval = tonumber(ARGV[1]), tonumber(ARGV[2])
if read(KEYS[1]) == slot + interval then
  store(KEYS[1], slot, now())
  return 1
end
return 0
`

// extendScript pushes the schedule to ARGV[1] + ARGV[2] unless it is at
// least there already; a schedule that is gone, or not one of these
// scripts', is made.
const extendScript = scheduleLua + `
local due = tonumber(ARGV[1]) + tonumber(ARGV[2])
local cur = read(KEYS[1])
if cur ~= nil and cur >= due then return 0 end
store(KEYS[1], due, now())
return 1
`

// releaseScript deletes the claim KEYS[1] while it holds the token ARGV[1].
const releaseScript = `
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`

func (s *Schedules) key(key string) string { return s.c.prefix + "pace:" + key }

// Take implements pace.SharedSchedules.
func (s *Schedules) Take(ctx context.Context, key string, interval, maxWait time.Duration) (slot int64, early time.Duration, taken bool, err error) {
	var reply []int64
	err = s.c.do(ctx, opPaceTake, func(ctx context.Context) error {
		reply, err = s.c.scripts.take.Run(ctx, s.c.rdb, []string{s.key(key)}, micros(interval), micros(maxWait)).Int64Slice()
		if err == nil && len(reply) != 3 {
			err = fmt.Errorf("take script answered %d numbers, not 3", len(reply))
		}
		return err
	})
	if err != nil {
		return 0, 0, false, err
	}
	return reply[0], time.Duration(reply[1]) * time.Microsecond, reply[2] == 1, nil
}

// GiveBack implements pace.SharedSchedules.
func (s *Schedules) GiveBack(ctx context.Context, key string, slot int64, interval time.Duration) error {
	return s.c.do(ctx, opPaceGiveBack, func(ctx context.Context) error {
		return s.c.scripts.giveBack.Run(ctx, s.c.rdb, []string{s.key(key)}, slot, micros(interval)).Err()
	})
}

// Extend pushes key's schedule to at least slot+by, slot as Take returned
// it (on Redis's clock, microseconds), unless it is later already: a
// request that took long spaces the next one out. A schedule that is gone
// is made, expiring as Take's do.
func (s *Schedules) Extend(ctx context.Context, key string, slot int64, by time.Duration) error {
	return s.c.do(ctx, opPaceExtend, func(ctx context.Context) error {
		return s.c.scripts.extend.Run(ctx, s.c.rdb, []string{s.key(key)}, slot, micros(by)).Err()
	})
}

// micros is d in whole microseconds, rounded up so that an interval never
// shrinks, and never negative.
func micros(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Microsecond - 1) / time.Microsecond)
}
