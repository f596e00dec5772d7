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
