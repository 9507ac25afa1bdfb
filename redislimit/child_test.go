package redislimit

const childEnv = "REDISLIMIT_CHILD"

func childMain() int { return 0 }
