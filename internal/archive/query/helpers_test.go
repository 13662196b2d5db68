package query_test

import (
	"testing"

	"github.com/crawlhouse/crawlhouse/internal/testkit/clickhousetest"
)

func TestMain(m *testing.M) { clickhousetest.RunMain(m) }
