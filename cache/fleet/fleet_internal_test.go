package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRedisFailed(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"connection lost", context.Background(), io.EOF, true},
		{"no answer within Timeout", context.Background(), context.DeadlineExceeded, true},
		{"an error of Redis", context.Background(), errors.New("LOADING Redis is loading the dataset in memory"), true},
		{"every connection of the pool busy", context.Background(), redis.ErrPoolTimeout, false},
		{"the pool's timeout, wrapped", context.Background(), fmt.Errorf("robots_get: %w", redis.ErrPoolTimeout), false},
		{"the caller gave up", cancelled, context.Canceled, false},
		{"the caller gave up, whatever the error", cancelled, io.EOF, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := redisFailed(tt.ctx, tt.err); got != tt.want {
				t.Errorf("redisFailed(%v) = %v; want %v", tt.err, got, tt.want)
			}
		})
	}
}

// redisError is an error as Redis answers it.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

func TestPermissionRefused(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"a key the ACL lacks", redisError("NOPERM this user has no permissions to access one of the keys used as arguments"), true},
		{"a command the ACL lacks", redisError("NOPERM User gate has no permissions to run the 'evalsha' command"), true},
		{"a script's command, Redis 7.0", redisError("ERR The user executing the script can't publish to the channel mentioned in the command script: 4656, on @user_script:17."), true},
		{"a script's command, Redis 7.2", redisError("ERR ACL failure in script: User gate has no permissions to run the 'publish' command script: 4656, on @user_script:17."), true},
		{"wrapped", fmt.Errorf("hold_store on redis: %w", redisError("NOPERM no permissions")), true},
		{"a password refused", redisError("WRONGPASS invalid username-password pair or user is disabled."), false},
		{"another error of Redis", redisError("LOADING Redis is loading the dataset in memory"), false},
		{"an error of a script", redisError("ERR user_script:3: Script attempted to access nonexistent global variable"), false},
		{"connection lost", io.EOF, false},
		{"the words, not from Redis", errors.New("ERR The user executing the script can't publish"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := permissionRefused(tt.err); got != tt.want {
				t.Errorf("permissionRefused(%v) = %v; want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestPoolTellsItsTimeout: the pool is sized for bursts, and a wait for
// one of its connections ends before the operation's deadline, so that the
// error is ErrPoolTimeout, which redisFailed does not hold against Redis.
func TestPoolTellsItsTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	// Nothing listens on port 1: New only finds Redis down.
	c, err := New(t.Context(), Options{URL: "redis://127.0.0.1:1", Timeout: timeout})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close()
	o := c.rdb.Options()
	if o.PoolTimeout <= 0 || o.PoolTimeout >= timeout {
		t.Errorf("PoolTimeout = %v; want more than 0, less than the Timeout %v", o.PoolTimeout, timeout)
	}
	if o.PoolSize < 64 || o.PoolSize < 10*runtime.GOMAXPROCS(0) {
		t.Errorf("PoolSize = %d; want 64 at least, and go-redis's default of 10 per CPU", o.PoolSize)
	}
}
