// Package plots draws the pictures in the repository's docs/ directory from
// runs of the limiters on testing/synctest's virtual clock, so that they are
// measured, not drawn by hand, and come out the same on every machine.
//
// The runs are in plots_test.go. To check that the committed pictures are
// current (CI does), and to rewrite them after a change:
//
//	cd bench && go test ./plots/
//	cd bench && go test ./plots/ -update
//
// The pictures are plain SVG, written here with the standard library: a
// Figure is a column of Panels sharing one time axis, each with a few Lines.
package plots

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Point is one point of a Line: X in the figure's unit (seconds), Y in the
// panel's.
type Point struct{ X, Y float64 }

// Line is a polyline in a panel, with a legend entry.
type Line struct {
	Label  string
	Color  string // an SVG color: "#1f77b4"
	Dashed bool
	Width  float64 // stroke width in pixels; 0 means 1.5
	Points []Point
	// Ticks, if set, are X positions marked by short strokes at the bottom
	// of the panel, in the line's color: one per event (a grant, a read).
	Ticks []float64
}

// Panel is one chart of a Figure.
type Panel struct {
	Title  string
	YLabel string
	YMax   float64 // the top of the Y axis
	YStep  float64 // between Y grid lines
	Lines  []Line
}

// Figure is a column of panels sharing an X axis from 0 to XMax.
type Figure struct {
	Title  string
	XLabel string
	XMax   float64
	XStep  float64 // between X grid lines
	Panels []Panel
}

// The layout, in pixels.
const (
	width       = 760
	marginLeft  = 64
	marginRight = 20
	titleHeight = 34
	panelHeight = 170
	panelGap    = 58 // between panels: the panel's title and legend
	axisHeight  = 44 // under the last panel: tick labels and the X label
	tickLength  = 7  // of an event tick
)

// SVG returns the figure as a standalone SVG document.
func (f Figure) SVG() []byte {
	height := titleHeight + len(f.Panels)*(panelGap+panelHeight) + axisHeight
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", marginLeft, esc(f.Title))
	top := titleHeight
	for i, p := range f.Panels {
		f.panel(&b, p, top+panelGap, i == len(f.Panels)-1)
		top += panelGap + panelHeight
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// panel draws p with its plot area's top at y0.
func (f Figure) panel(b *strings.Builder, p Panel, y0 int, last bool) {
	x := func(v float64) float64 { return marginLeft + v/f.XMax*(width-marginLeft-marginRight) }
	y := func(v float64) float64 { return float64(y0) + (1-v/p.YMax)*panelHeight }
	right := float64(width - marginRight)

	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", marginLeft, y0-36, esc(p.Title))
	legend(b, p.Lines, y0-14)
	// Grid and axes.
	for v := 0.0; v <= p.YMax+1e-9; v += p.YStep {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e3e3e3"/>`+"\n", marginLeft, y(v), right, y(v))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginLeft-6, y(v)+4, number(v))
	}
	for v := 0.0; v <= f.XMax+1e-9; v += f.XStep {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e3e3e3"/>`+"\n", x(v), y0, x(v), y0+panelHeight)
		if last {
			fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(v), y0+panelHeight+16, number(v))
		}
	}
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", marginLeft, y0, width-marginLeft-marginRight, panelHeight)
	fmt.Fprintf(b, `<text transform="translate(16 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", y0+panelHeight/2, esc(p.YLabel))
	if last {
		fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (marginLeft+width-marginRight)/2, y0+panelHeight+36, esc(f.XLabel))
	}
	// Data: ticks at the bottom, then the lines, the first on top.
	for i := len(p.Lines) - 1; i >= 0; i-- {
		l := p.Lines[i]
		if len(l.Ticks) > 0 {
			var d strings.Builder
			for _, t := range l.Ticks {
				fmt.Fprintf(&d, "M%.1f %dv%d", x(t), y0+panelHeight, -tickLength)
			}
			fmt.Fprintf(b, `<path d="%s" stroke="%s" stroke-opacity="0.6" fill="none"/>`+"\n", d.String(), l.Color)
		}
	}
	for i := len(p.Lines) - 1; i >= 0; i-- {
		polyline(b, p.Lines[i], x, y)
	}
}

// polyline draws l's points with the scales x and y.
func polyline(b *strings.Builder, l Line, x, y func(float64) float64) {
	if len(l.Points) == 0 {
		return
	}
	w := l.Width
	if w == 0 {
		w = 1.5
	}
	dash := ""
	if l.Dashed {
		dash = ` stroke-dasharray="6 4"`
	}
	var pts strings.Builder
	for i, p := range l.Points {
		if i > 0 {
			pts.WriteByte(' ')
		}
		fmt.Fprintf(&pts, "%.1f,%.1f", x(p.X), y(p.Y))
	}
	fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="%s"%s stroke-linejoin="round"/>`+"\n", pts.String(), l.Color, number(w), dash)
}

// legend draws one entry per labelled line, left to right, at baseline y.
func legend(b *strings.Builder, lines []Line, y int) {
	x := marginLeft
	for _, l := range lines {
		if l.Label == "" {
			continue
		}
		dash := ""
		if l.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2.5"%s/>`+"\n", x, y-4, x+24, y-4, l.Color, dash)
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", x+30, y, esc(l.Label))
		x += 30 + 7*len([]rune(l.Label)) + 22
	}
}

// number formats a tick value without trailing zeros: 0, 0.5, 12.
func number(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(fmt.Sprintf("%.2f", v), "0")
}

func esc(s string) string { return html.EscapeString(s) }
