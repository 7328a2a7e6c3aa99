/*
 * Scores cache-tests results with the suite's own classifier, exactly as
 * cache-tests.fyi does (dependencies honoured), and prints one JSON object:
 *   { "tests": [ { "id", "kind", "suite", "name", "depends_on", "result",
 *                  "alone", "detail" } ],
 *     "published": { "nginx": { "id": "result", ... }, ... } }
 * where result is the name of the suite's result type (pass, fail,
 * optional_fail, yes, no, setup_fail, harness_fail, dependency_fail,
 * retry, untested), alone the same without dependencies (what the test
 * itself saw) and detail the suite's message for a failure.
 *
 *   node score.mjs SUITE_DIR RESULTS.json [PUBLISHED_NAME...]
 *
 * SUITE_DIR is the http-cache-tests package (0.4.5 from npm: lib/ and
 * tests/, with Surrogate-Control added as its site and CLI add it) or a
 * checkout of the repository (test-engine/lib/results.mjs).
 */
import fs from 'fs'
import path from 'path'
import { pathToFileURL } from 'url'

const [dir, resultsFile, ...published] = process.argv.slice(2)
const url = p => pathToFileURL(path.join(dir, p)).href

let classify, suites
if (fs.existsSync(path.join(dir, 'test-engine/lib/results.mjs'))) {
  classify = (await import(url('test-engine/lib/results.mjs')))
    .determineTestResult
  suites = (await import(url('tests/index.mjs'))).default
} else {
  classify = (await import(url('lib/display.mjs'))).determineTestResult
  suites = (await import(url('tests/index.mjs'))).default
  suites.push((await import(url('tests/surrogate-control.mjs'))).default)
}

/* The result types are told apart by their text symbol. */
const names = {
  '-': 'untested', '✅': 'pass', '⛔️': 'fail', '⚠️': 'optional_fail',
  Y: 'yes', N: 'no', '🔹': 'setup_fail', '⁉️': 'harness_fail',
  '⚪️': 'dependency_fail', '↻': 'retry'
}

function score (results) {
  const out = []
  for (const suite of suites) {
    for (const test of suite.tests) {
      const r = classify(suites, test.id, results)
      const a = classify(suites, test.id, results, false)
      const raw = results[test.id]
      out.push({
        id: test.id,
        kind: test.kind || 'required',
        suite: suite.id,
        name: test.name,
        result: names[r[2]] || r[2],
        alone: names[a[2]] || a[2],
        depends_on: test.depends_on,
        detail: Array.isArray(raw) ? raw.slice(1).join(': ') : undefined
      })
    }
  }
  return out
}

const out = { tests: score(JSON.parse(fs.readFileSync(resultsFile))) }
out.published = {}
for (const name of published) {
  const f = path.join(dir, 'results', name + '.json')
  if (!fs.existsSync(f)) continue
  out.published[name] = {}
  for (const t of score(JSON.parse(fs.readFileSync(f)))) {
    out.published[name][t.id] = t.result
  }
}
console.log(JSON.stringify(out))
