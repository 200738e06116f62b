# Targets: setup, run, test, bench, lint, build. See README.md.
GO        ?= go
PKGS      := ./...
export DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
export REDIS_URL    ?= redis://127.0.0.1:6379/0

.PHONY: setup run test bench lint build migrate screenshots reset fuzz chaos

## setup: download modules and build every binary once.
setup:
	$(GO) mod download
	$(GO) build $(PKGS)

## run: the whole service on embedded defaults (kfake, simulator, edge on 127.0.0.1:8080).
run:
	$(GO) run ./infra/cmd/devstack

## test: unit and integration tests against real Postgres, Redis and Kafka over TCP.
test:
	$(GO) test -count=1 -timeout 20m $(PKGS)

## screenshots: every dashboard screen at desktop and phone width, as PNGs in screenshots/
## (ignored by git), from the browser test on a dev stack. Needs chromium.
screenshots:
	SCREENSHOTS_DIR=$(CURDIR)/screenshots $(GO) test -count=1 -run TestDashboardInBrowser ./infra/cmd/devstack/
## fuzz: every Go fuzz target (func FuzzX in *_test.go) in turn, each for FUZZTIME
## (default 30s; e.g. make fuzz FUZZTIME=10m). `make test` runs their committed seeds
## (f.Add and testdata/fuzz); a crash found here is saved under testdata/fuzz: commit it.
FUZZTIME ?= 30s
fuzz:
	@set -e; for dir in $$(git grep -l '^func Fuzz' -- '*_test.go' | xargs -n1 dirname | sort -u); do \
	  for fn in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go | cut -c6-); do \
	    echo "fuzz $$dir $$fn ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) ./$$dir/; \
	  done; \
	done

## chaos: the chaos soak (docs/reliability.md): the dev stack on a Postgres and a Redis of
## its own, under steady signed order load for CHAOS_DURATION (default 2m; e.g. make chaos
## CHAOS_DURATION=10m) while SIGKILL, Postgres and Redis restarts and outages, node faults
## and forks are injected and short rentals end; then every invariant is checked. Ends with
## the line `chaos: N orders, F faults, E ended under faults, P% delivered (R refused by
## faults), L lost, D duplicated, C charged twice, W charged wrong, G delegated twice,
## S stuck, X unexpected exits` and fails unless every column is 0 and P >= 90. `make test`
## runs it for two minutes and then plants one defect of each kind to test the checker.
CHAOS_DURATION ?= 2m
chaos:
	CHAOS_DURATION=$(CHAOS_DURATION) $(GO) run ./infra/cmd/chaos

## bench: benchmarks, each ending with a `bench NAME: VALUE UNIT, ratio R vs REFERENCE` line.
bench:
	bash infra/bench/run.sh

## lint: formatting, vet, leftover merge markers, and the house rules of docs/architecture.md
## (import directions, SQL only in infra/, one writer per table, lean binaries).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	@if git grep -nE '^(<<<<<<<|>>>>>>>) ' -- . ':!*.sum'; then echo "merge markers left"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) test -count=1 ./infra/layout/

build:
	$(GO) build -o bin/ ./edge/cmd/... ./chainwatch/cmd/... ./infra/cmd/... ./processors/cmd/... ./consumers/cmd/...

## migrate: apply pending migrations to DATABASE_URL.
migrate:
	$(GO) run ./infra/cmd/migrate

## reset: start the dev stack's chain and its database afresh together: removes DATA_DIR
## (simulator and broker state) and every table of DATABASE_URL, then migrates.
reset:
	rm -rf "$${DATA_DIR:-.data}"
	$(GO) run ./infra/cmd/migrate -reset
