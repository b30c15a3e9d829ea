// Package console is the browser test of Skein Console: Debian's chromium,
// headless, driven with chromedp against a real `skein dev --console-demos`
// cluster. It loads /console/, creates a topic and produces through the
// page, kills a partition leader with the page's demo button and watches
// the new leader appear, with a screenshot of every step. Build tag
// integration; it skips itself only where no chromium is installed
// (tests/console/install.sh installs Debian's).
package console
