// Package window counts instants in sliding windows, the way the example
// programs check a limit after the fact: given when each grant, request or
// send happened (as offsets from a common origin), Peak returns the most of
// them that fall in any one window of a given width, wherever the window
// starts. A limiter that allows at most N events in any window of width W
// kept its bound exactly when Peak(instants, W) <= N.
//
// The windows are half-open, [t, t+width): two instants exactly width apart
// never share one. A program whose measurement is less exact than its
// limiter (an instant known only within some error) passes a narrower width.
package window
