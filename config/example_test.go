package config_test

import (
	"fmt"

	"robotsgate/config"
)

func ExampleLoadFrom() {
	_, err := config.LoadFrom(map[string]string{
		"ROBOTSGATE_MODE":          "enforcing",
		"ROBOTSGATE_FETCH_TIMEOUT": "5",
		"ROBOTSGATE_LISTN":         "0.0.0.0:8080",
	})
	fmt.Println(err)
	// Output:
	// ROBOTSGATE_MODE: "enforcing" is not valid; use "enforce" or "audit"
	// ROBOTSGATE_FETCH_TIMEOUT: "5" is not a duration; use e.g. "5s" or "1m30s"
	// ROBOTSGATE_LISTN: unknown variable; did you mean ROBOTSGATE_LISTEN?
}

func ExampleByteSize_String() {
	var limit config.ByteSize
	if err := limit.UnmarshalText([]byte("512000")); err != nil {
		panic(err)
	}
	fmt.Println(limit, config.ByteSize(1_500_000))
	// Output: 500 KiB 1500 kB
}

func ExampleEffective() {
	_, settings, err := config.Effective(map[string]string{
		"ROBOTSGATE_MODE":        "audit",
		"ROBOTSGATE_MAX_FETCHES": "40",
		"ROBOTSGATE_REDIS_URL":   "redis://default:secret@10.0.0.5:6379/0",
	}, "v1.0.0")
	if err != nil {
		panic(err)
	}
	for _, s := range settings {
		switch s.Name {
		case "ROBOTSGATE_MODE", "ROBOTSGATE_CRAWL_DELAY", "ROBOTSGATE_MAX_FETCHES_PER_CLIENT", "ROBOTSGATE_FETCH_TIMEOUT", "ROBOTSGATE_REDIS_URL":
			fmt.Printf("%s=%s (%s)\n", s.Name, s.Value, s.SourceText())
		}
	}
	// Output:
	// ROBOTSGATE_MODE=audit (environment)
	// ROBOTSGATE_CRAWL_DELAY=audit (derived from ROBOTSGATE_MODE)
	// ROBOTSGATE_FETCH_TIMEOUT=5s (default)
	// ROBOTSGATE_MAX_FETCHES_PER_CLIENT=10 (derived from ROBOTSGATE_MAX_FETCHES)
	// ROBOTSGATE_REDIS_URL=redis://default:****@10.0.0.5:6379/0 (environment)
}
