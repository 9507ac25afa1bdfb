package pool_test

import "runtime"

func runtimeGoexit() { runtime.Goexit() }
