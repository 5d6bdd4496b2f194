// Drives redsync (v4, over go-redis v9, one pool) for the interoperability tests, one
// command per line.
//
// Usage: redsync_driver REDIS_URL
//
// Reads one command per line on stdin and answers one line on stdout:
//
//	acquire NAME TIMEOUT_MS BLOCKING_TIMEOUT_MS  -> acquired TOKEN | busy
//	release NAME                                 -> released | not-owned
//	extend NAME ADDITIONAL_MS                    -> extended | not-owned
//	owned NAME                                   -> true | false
//	release-token NAME TOKEN                     -> released | not-owned
//	quit                                         -> (exits, no answer)
//
// redsync's own semantics show through, unchanged:
//   - `acquire` with BLOCKING_TIMEOUT_MS 0 is TryLock, one try. Otherwise Lock, with one
//     try every 100 ms (WithRetryDelay) and as many tries (WithTries) as fit in
//     BLOCKING_TIMEOUT_MS after the first. redsync sets no key without an expiry:
//     TIMEOUT_MS 0 is an error.
//   - `extend` sets the key's time to live to the mutex's expiry (a script's PEXPIRE): this
//     driver extends with a mutex of the same value whose expiry is ADDITIONAL_MS, so the
//     time to live becomes ADDITIONAL_MS, as with node-redlock.
//   - A release or extend that finds another value (redsync's ErrTaken) or no key
//     (ErrLockAlreadyExpired) answers `not-owned`.
//   - `owned` has no redsync counterpart: it answers whether the key holds this lock's
//     value (GET), the way redis-py's `owned()` does.
//   - `release-token` unlocks a mutex made with the given value (WithValue).
//
// Any other failure answers `error MESSAGE`. Commands are handled one at a time, in order.
// The driver exits when stdin closes, so it dies with the process that started it.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

const pollDelay = 100 * time.Millisecond

type driver struct {
	client *goredislib.Client
	rs     *redsync.Redsync
	locks  map[string]*redsync.Mutex
}

func milliseconds(text string) (time.Duration, error) {
	n, err := strconv.ParseUint(text, 10, 63)
	if err != nil {
		return 0, fmt.Errorf("not a whole number of milliseconds: %s", text)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// Whether redsync failed because the key held another value or none, as opposed to a
// connection or server error.
func notOwned(err error) bool {
	var taken *redsync.ErrTaken
	return errors.As(err, &taken) || errors.Is(err, redsync.ErrLockAlreadyExpired)
}

func (d *driver) held(name string) (*redsync.Mutex, error) {
	mutex, ok := d.locks[name]
	if !ok {
		return nil, fmt.Errorf("no lock held under %s", name)
	}
	return mutex, nil
}

func (d *driver) acquire(name, timeoutMs, blockingTimeoutMs string) (string, error) {
	expiry, err := milliseconds(timeoutMs)
	if err != nil {
		return "", err
	}
	if expiry == 0 {
		return "", errors.New("redsync sets no key without an expiry")
	}
	blocking, err := milliseconds(blockingTimeoutMs)
	if err != nil {
		return "", err
	}
	tries := 1 + int((blocking+pollDelay-1)/pollDelay)
	mutex := d.rs.NewMutex(name,
		redsync.WithExpiry(expiry),
		redsync.WithTries(tries),
		redsync.WithRetryDelay(pollDelay),
	)
	if blocking == 0 {
		err = mutex.TryLock()
	} else {
		err = mutex.Lock()
	}
	if errors.Is(err, redsync.ErrFailed) || notOwned(err) {
		return "busy", nil
	}
	if err != nil {
		return "", err
	}
	d.locks[name] = mutex
	return "acquired " + mutex.Value(), nil
}

func (d *driver) release(name string) (string, error) {
	mutex, err := d.held(name)
	if err != nil {
		return "", err
	}
	ok, err := mutex.Unlock()
	if !ok && !notOwned(err) {
		return "", err
	}
	delete(d.locks, name)
	if !ok {
		return "not-owned", nil
	}
	return "released", nil
}

func (d *driver) extend(name, additionalMs string) (string, error) {
	mutex, err := d.held(name)
	if err != nil {
		return "", err
	}
	additional, err := milliseconds(additionalMs)
	if err != nil {
		return "", err
	}
	longer := d.rs.NewMutex(name, redsync.WithExpiry(additional), redsync.WithValue(mutex.Value()))
	ok, err := longer.Extend()
	if !ok && notOwned(err) {
		return "not-owned", nil
	}
	if !ok {
		return "", err
	}
	d.locks[name] = longer
	return "extended", nil
}

func (d *driver) owned(name string) (string, error) {
	mutex, ok := d.locks[name]
	if !ok {
		return "false", nil
	}
	value, err := d.client.Get(context.Background(), name).Result()
	if errors.Is(err, goredislib.Nil) {
		return "false", nil
	}
	if err != nil {
		return "", err
	}
	return strconv.FormatBool(value == mutex.Value()), nil
}

func (d *driver) releaseToken(name, token string) (string, error) {
	ok, err := d.rs.NewMutex(name, redsync.WithValue(token)).Unlock()
	if ok {
		return "released", nil
	}
	if notOwned(err) {
		return "not-owned", nil
	}
	return "", err
}

func (d *driver) answer(line string) string {
	words := strings.Fields(line)
	if len(words) == 0 {
		return "error empty command"
	}
	type command struct {
		arity int
		run   func(args []string) (string, error)
	}
	commands := map[string]command{
		"acquire": {3, func(a []string) (string, error) { return d.acquire(a[0], a[1], a[2]) }},
		"release": {1, func(a []string) (string, error) { return d.release(a[0]) }},
		"extend":  {2, func(a []string) (string, error) { return d.extend(a[0], a[1]) }},
		"owned":   {1, func(a []string) (string, error) { return d.owned(a[0]) }},
		"release-token": {2, func(a []string) (string, error) {
			return d.releaseToken(a[0], a[1])
		}},
	}
	name, args := words[0], words[1:]
	cmd, ok := commands[name]
	if !ok {
		return "error unknown command " + name
	}
	if len(args) != cmd.arity {
		return fmt.Sprintf("error %s takes %d arguments, got %d", name, cmd.arity, len(args))
	}
	reply, err := cmd.run(args)
	if err != nil {
		return "error " + strings.Join(strings.Fields(err.Error()), " ")
	}
	return reply
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: redsync_driver REDIS_URL")
		os.Exit(2)
	}
	options, err := goredislib.ParseURL(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	client := goredislib.NewClient(options)
	d := &driver{
		client: client,
		rs:     redsync.New(goredis.NewPool(client)),
		locks:  map[string]*redsync.Mutex{},
	}
	input := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for input.Scan() {
		line := input.Text()
		if strings.TrimSpace(line) == "quit" {
			return
		}
		fmt.Fprintln(out, d.answer(line))
		// The test process is gone when stdout breaks.
		if out.Flush() != nil {
			return
		}
	}
}
