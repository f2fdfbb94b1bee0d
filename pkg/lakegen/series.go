package lakegen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// frequencyMix is the share of each frequency among generated series (see the
// package documentation for the resulting rows per series).
var frequencyMix = [numFreq]float64{
	Daily:     0.005,
	Weekly:    0.02,
	Monthly:   0.38,
	Quarterly: 0.15,
	Annual:    0.445,
}

// startAtFirstYear is the share of series that start in FromYear; the others
// start in a year drawn uniformly from FromYear+1..ToYear.
const startAtFirstYear = 0.5

// stepSigma is the standard deviation of one period's step of the log value.
var stepSigma = [numFreq]float64{
	Daily:     0.015,
	Weekly:    0.03,
	Monthly:   0.05,
	Quarterly: 0.08,
	Annual:    0.15,
}

// nullRate is the probability that an observation's value is null.
const nullRate = 0.005

type dataset int

const (
	dsPET dataset = iota
	dsNG
	dsELEC
	dsCOAL
	dsTOTAL
	dsINTL
	dsSEDS
	dsSTEO
	numDatasets
)

var datasetNames = [numDatasets]string{"PET", "NG", "ELEC", "COAL", "TOTAL", "INTL", "SEDS", "STEO"}

// datasetMix is the share of each dataset among the series of one frequency.
var datasetMix = [numFreq][numDatasets]float64{
	Daily:     {dsPET: 0.6, dsNG: 0.4},
	Weekly:    {dsPET: 0.6, dsNG: 0.25, dsCOAL: 0.15},
	Monthly:   {dsPET: 0.2, dsNG: 0.2, dsELEC: 0.25, dsCOAL: 0.05, dsTOTAL: 0.05, dsINTL: 0.15, dsSTEO: 0.1},
	Quarterly: {dsELEC: 0.6, dsCOAL: 0.25, dsSTEO: 0.15},
	Annual:    {dsPET: 0.08, dsNG: 0.08, dsELEC: 0.12, dsCOAL: 0.05, dsTOTAL: 0.02, dsINTL: 0.25, dsSEDS: 0.38, dsSTEO: 0.02},
}

// item is a word-list entry: a display name and the code it contributes to
// the series id.
type item struct{ name, code string }

// measure is one kind of series of a dataset. name and code are templates:
// {r} is replaced by the region, {p} by the product's name (in name) or code
// (in code), and {u} in code by the series' unique token.
type measure struct {
	ds       dataset
	freqs    string // letters of the frequencies it exists in
	name     string
	code     string
	units    string
	category string
	level    float64 // typical value
	decimals int
	regions  []string
	products []item
}

var (
	usOnly     = []string{"U.S."}
	petRegions = []string{"U.S.", "East Coast (PADD 1)", "New England (PADD 1A)", "Central Atlantic (PADD 1B)",
		"Lower Atlantic (PADD 1C)", "Midwest (PADD 2)", "Gulf Coast (PADD 3)", "Rocky Mountain (PADD 4)",
		"West Coast (PADD 5)", "California", "Colorado", "Florida", "Massachusetts", "Minnesota", "New York",
		"Ohio", "Texas", "Washington", "Boston, MA", "Chicago, IL", "Cleveland, OH", "Denver, CO",
		"Houston, TX", "Los Angeles, CA", "Miami, FL", "New York City", "San Francisco, CA", "Seattle, WA"}
	crudeStreams = []string{"Cushing, OK WTI", "Europe Brent", "Louisiana Light Sweet", "Mars Blend",
		"West Texas Sour", "Alaska North Slope", "Dubai Fateh", "Western Canadian Select", "Bonny Light", "Urals"}
	productHubs = []string{"New York Harbor", "U.S. Gulf Coast", "Los Angeles", "Mont Belvieu, TX", "Chicago", "Singapore"}
	gasHubs     = []string{"Henry Hub", "Waha Hub", "Dominion South", "Chicago Citygate", "SoCal Border",
		"Algonquin Citygate", "Opal", "Transco Zone 6 NY", "Katy", "Malin"}
	states = []string{"U.S.", "Alabama", "Alaska", "Arizona", "California", "Colorado", "Florida", "Georgia",
		"Illinois", "Indiana", "Iowa", "Kansas", "Kentucky", "Louisiana", "Michigan", "Minnesota", "New Mexico",
		"New York", "North Carolina", "North Dakota", "Ohio", "Oklahoma", "Pennsylvania", "Tennessee", "Texas",
		"Utah", "Virginia", "Washington", "West Virginia", "Wisconsin", "Wyoming"}
	coalRegions = []string{"U.S.", "Appalachian Region", "Northern Appalachia", "Central Appalachia",
		"Interior Region", "Illinois Basin", "Western Region", "Powder River Basin", "Uinta Basin", "Wyoming",
		"West Virginia", "Kentucky", "Pennsylvania", "Illinois", "Montana"}
	countries = []string{"World", "United States", "China", "Russia", "Saudi Arabia", "Canada", "Iraq", "Brazil",
		"United Arab Emirates", "Iran", "Kuwait", "Norway", "Mexico", "Kazakhstan", "Qatar", "Nigeria", "Algeria",
		"Libya", "Angola", "United Kingdom", "India", "Japan", "Germany", "South Korea", "France", "Indonesia",
		"Australia", "Venezuela", "Argentina", "Colombia"}
	steoRegions = []string{"U.S.", "World", "OPEC", "Non-OPEC", "OECD", "China"}

	gasolineGrades = []item{{"Regular Gasoline", "EPMR"}, {"Midgrade Gasoline", "EPMM"},
		{"Premium Gasoline", "EPMP"}, {"All Grades Gasoline", "EPM0"}, {"No 2 Diesel", "EPD2D"},
		{"Ultra Low Sulfur Diesel", "EPD2DXL0"}}
	refinedProducts = []item{{"Conventional Gasoline Regular", "EPMRU"}, {"No. 2 Heating Oil", "EPD2F"},
		{"Ultra-Low-Sulfur No. 2 Diesel", "EPD2DXL0"}, {"Kerosene-Type Jet Fuel", "EPJK"}, {"Propane", "EPLLPA"}}
	stockProducts = []item{{"Crude Oil", "EPC0"}, {"Total Gasoline", "EPM0"}, {"Distillate Fuel Oil", "EPD0"},
		{"Propane and Propylene", "EPLLPZ"}, {"Kerosene-Type Jet Fuel", "EPJK"}, {"Residual Fuel Oil", "EPPR"}}
	elecFuels = []item{{"All Fuels", "ALL"}, {"Coal", "COW"}, {"Natural Gas", "NG"}, {"Nuclear", "NUC"},
		{"Conventional Hydroelectric", "HYC"}, {"Wind", "WND"}, {"Utility-Scale Solar", "SUN"},
		{"Petroleum Liquids", "PEL"}}
	elecSectors = []item{{"Residential", "RES"}, {"Commercial", "COM"}, {"Industrial", "IND"},
		{"Transportation", "TRA"}, {"All", "ALL"}}
	coalSectors = []item{{"Electric Power", "EPS"}, {"Coke Plants", "COK"}, {"Other Industrial", "OIS"},
		{"Residential and Commercial", "RC"}}
	totalSectors = []item{{"All", "TETC"}, {"Residential", "TERC"}, {"Commercial", "TECC"},
		{"Industrial", "TEIC"}, {"Transportation", "TEAC"}}
	primarySources = []item{{"Coal", "CL"}, {"Natural Gas", "NG"}, {"Crude Oil", "PA"}, {"Nuclear", "NU"},
		{"Renewable Energy", "RE"}}
	emissionSources = []item{{"Coal", "CL"}, {"Natural Gas", "NN"}, {"Petroleum", "PM"}, {"All Fuels", "TE"}}
	sedsSectors     = []item{{"Residential", "TER"}, {"Commercial", "TEC"}, {"Industrial", "TEI"},
		{"Transportation", "TEA"}, {"Electric Power", "TEE"}}
	steoSectors = []item{{"Residential", "RC"}, {"Commercial", "CC"}, {"Industrial", "IC"}, {"All", "TC"}}
)

var measures = []measure{
	// Petroleum
	{ds: dsPET, freqs: "WMA", name: "{r} {p} Retail Price", code: "EMM_{p}_PTE_{u}_DPG",
		units: "$/gal", category: "Petroleum/Prices/Retail", level: 2.6, decimals: 3, regions: petRegions, products: gasolineGrades},
	{ds: dsPET, freqs: "DWMA", name: "{r} Spot Price FOB", code: "RCL{u}",
		units: "$/bbl", category: "Petroleum/Prices/Spot", level: 55, decimals: 2, regions: crudeStreams},
	{ds: dsPET, freqs: "DWMA", name: "{r} {p} Spot Price FOB", code: "EER_{p}_PF4_{u}_DPG",
		units: "$/gal", category: "Petroleum/Prices/Spot", level: 1.9, decimals: 3, regions: productHubs, products: refinedProducts},
	{ds: dsPET, freqs: "MA", name: "{r} Field Production of Crude Oil", code: "MCRFP{u}2",
		units: "thousand barrels per day", category: "Petroleum/Supply/Production", level: 900, decimals: 0, regions: petRegions},
	{ds: dsPET, freqs: "WMA", name: "{r} Ending Stocks of {p}", code: "W{p}ST_{u}_1",
		units: "thousand barrels", category: "Petroleum/Stocks", level: 60000, decimals: 0, regions: petRegions, products: stockProducts},
	{ds: dsPET, freqs: "WMA", name: "{r} Imports of {p}", code: "W{p}IM_{u}_2",
		units: "thousand barrels per day", category: "Petroleum/Imports", level: 700, decimals: 0, regions: petRegions, products: stockProducts},
	// Natural gas
	{ds: dsNG, freqs: "MA", name: "{r} Natural Gas Industrial Price", code: "N3035{u}3",
		units: "$/Mcf", category: "Natural Gas/Prices/Industrial", level: 5.5, decimals: 2, regions: states},
	{ds: dsNG, freqs: "MA", name: "{r} Natural Gas Residential Price", code: "N3010{u}3",
		units: "$/Mcf", category: "Natural Gas/Prices/Residential", level: 11.5, decimals: 2, regions: states},
	{ds: dsNG, freqs: "MA", name: "{r} Natural Gas Citygate Price", code: "N3050{u}3",
		units: "$/Mcf", category: "Natural Gas/Prices/Citygate", level: 5, decimals: 2, regions: states},
	{ds: dsNG, freqs: "DWMA", name: "{r} Natural Gas Spot Price", code: "RNG{u}",
		units: "$/MMBtu", category: "Natural Gas/Prices/Spot", level: 3.5, decimals: 2, regions: gasHubs},
	{ds: dsNG, freqs: "MA", name: "{r} Natural Gas Marketed Production", code: "N9050{u}2",
		units: "MMcf", category: "Natural Gas/Production", level: 150000, decimals: 0, regions: states},
	{ds: dsNG, freqs: "WMA", name: "{r} Working Gas in Underground Storage", code: "NW2_EPG0_SWO_{u}_BCF",
		units: "Bcf", category: "Natural Gas/Storage", level: 2500, decimals: 0, regions: states},
	{ds: dsNG, freqs: "MA", name: "{r} Natural Gas Total Consumption", code: "N9140{u}2",
		units: "MMcf", category: "Natural Gas/Consumption", level: 200000, decimals: 0, regions: states},
	// Electricity (EIA's ELEC ids have dots inside the code)
	{ds: dsELEC, freqs: "MQA", name: "{r} Net Generation from {p}, All Sectors", code: "GEN.{p}-{u}-99",
		units: "thousand MWh", category: "Electricity/Generation", level: 30000, decimals: 2, regions: states, products: elecFuels},
	{ds: dsELEC, freqs: "MQA", name: "{r} Retail Sales of Electricity, {p} Sector", code: "SALES.{u}-{p}",
		units: "million kWh", category: "Electricity/Retail Sales", level: 40000, decimals: 1, regions: states, products: elecSectors},
	{ds: dsELEC, freqs: "MQA", name: "{r} Average Retail Price of Electricity, {p} Sector", code: "PRICE.{u}-{p}",
		units: "cents/kWh", category: "Electricity/Prices", level: 11, decimals: 2, regions: states, products: elecSectors},
	{ds: dsELEC, freqs: "MQA", name: "{r} Coal Consumed for Electricity Generation", code: "CONS_TOT.COW-{u}-99",
		units: "thousand short tons", category: "Electricity/Fuel Consumption", level: 5000, decimals: 1, regions: states},
	// Coal
	{ds: dsCOAL, freqs: "WQA", name: "{r} Coal Production", code: "PRODUCTION_{u}",
		units: "short tons", category: "Coal/Production", level: 2000000, decimals: 0, regions: coalRegions},
	{ds: dsCOAL, freqs: "QA", name: "{r} Average Sales Price of Coal", code: "PRICE_{u}",
		units: "$/short ton", category: "Coal/Prices", level: 35, decimals: 2, regions: coalRegions},
	{ds: dsCOAL, freqs: "MQA", name: "{r} Coal Exports", code: "EXPORT_{u}",
		units: "short tons", category: "Coal/Exports", level: 8000000, decimals: 0, regions: coalRegions},
	{ds: dsCOAL, freqs: "MQA", name: "{r} Coal Consumption, {p} Sector", code: "CONS_{p}_{u}",
		units: "thousand short tons", category: "Coal/Consumption", level: 40000, decimals: 0, regions: coalRegions, products: coalSectors},
	// Total energy
	{ds: dsTOTAL, freqs: "MA", name: "{r} Total Energy Consumption, {p} Sector", code: "{p}B_{u}",
		units: "quadrillion Btu", category: "Total Energy/Consumption", level: 8, decimals: 3, regions: usOnly, products: totalSectors},
	{ds: dsTOTAL, freqs: "MA", name: "{r} Primary Energy Production from {p}", code: "{p}PRB_{u}",
		units: "quadrillion Btu", category: "Total Energy/Production", level: 6, decimals: 3, regions: usOnly, products: primarySources},
	{ds: dsTOTAL, freqs: "MA", name: "{r} Energy-Related CO2 Emissions from {p}", code: "{p}EIE_{u}",
		units: "million metric tons CO2", category: "Total Energy/Environment", level: 150, decimals: 1, regions: usOnly, products: emissionSources},
	// International
	{ds: dsINTL, freqs: "MA", name: "{r} Petroleum and Other Liquids Production", code: "57-1-{u}-TBPD",
		units: "thousand barrels per day", category: "International/Petroleum/Production", level: 1500, decimals: 1, regions: countries},
	{ds: dsINTL, freqs: "MA", name: "{r} Dry Natural Gas Production", code: "26-1-{u}-BCF",
		units: "billion cubic feet", category: "International/Natural Gas/Production", level: 500, decimals: 1, regions: countries},
	{ds: dsINTL, freqs: "MA", name: "{r} Electricity Generation", code: "2-12-{u}-BKWH",
		units: "billion kWh", category: "International/Electricity/Generation", level: 200, decimals: 2, regions: countries},
	{ds: dsINTL, freqs: "A", name: "{r} Total Primary Energy Consumption", code: "44-2-{u}-QBTU",
		units: "quadrillion Btu", category: "International/Total Energy/Consumption", level: 3, decimals: 3, regions: countries},
	{ds: dsINTL, freqs: "A", name: "{r} Coal Production", code: "7-1-{u}-TST",
		units: "thousand short tons", category: "International/Coal/Production", level: 60000, decimals: 0, regions: countries},
	// State Energy Data System (annual only)
	{ds: dsSEDS, freqs: "A", name: "{r} Total Energy Consumed by the {p} Sector", code: "{p}CB.{u}",
		units: "billion Btu", category: "SEDS/Consumption", level: 500000, decimals: 0, regions: states, products: sedsSectors},
	{ds: dsSEDS, freqs: "A", name: "{r} Total Energy Average Price, {p} Sector", code: "{p}CD.{u}",
		units: "$/MMBtu", category: "SEDS/Prices", level: 20, decimals: 2, regions: states, products: sedsSectors},
	{ds: dsSEDS, freqs: "A", name: "{r} Total Energy Expenditures, {p} Sector", code: "{p}CV.{u}",
		units: "million dollars", category: "SEDS/Expenditures", level: 20000, decimals: 1, regions: states, products: sedsSectors},
	{ds: dsSEDS, freqs: "A", name: "{r} Real Gross Domestic Product", code: "GDPRX.{u}",
		units: "million chained 2017 dollars", category: "SEDS/Indicators", level: 300000, decimals: 1, regions: states},
	// Short-Term Energy Outlook
	{ds: dsSTEO, freqs: "MQA", name: "Brent Crude Oil Spot Price", code: "BREPUUS_{u}",
		units: "$/bbl", category: "STEO/Prices", level: 60, decimals: 2},
	{ds: dsSTEO, freqs: "MQA", name: "Henry Hub Natural Gas Spot Price", code: "NGHHUUS_{u}",
		units: "$/MMBtu", category: "STEO/Prices", level: 3.5, decimals: 2},
	{ds: dsSTEO, freqs: "MQA", name: "{r} Crude Oil Production", code: "PAPR_{u}",
		units: "million barrels per day", category: "STEO/Supply", level: 10, decimals: 3, regions: steoRegions},
	{ds: dsSTEO, freqs: "MQA", name: "{r} Liquid Fuels Consumption", code: "PATC_{u}",
		units: "million barrels per day", category: "STEO/Demand", level: 20, decimals: 3, regions: steoRegions},
	{ds: dsSTEO, freqs: "MQA", name: "{r} Retail Electricity Price, {p} Sector", code: "ES{p}UUS_{u}",
		units: "cents/kWh", category: "STEO/Prices", level: 12, decimals: 2, regions: usOnly, products: steoSectors},
}

// measuresFor[f][ds] lists the measures of dataset ds that exist at frequency f.
var measuresFor = func() (m [numFreq][numDatasets][]*measure) {
	for i := range measures {
		ms := &measures[i]
		for f := Frequency(0); f < numFreq; f++ {
			if strings.Contains(ms.freqs, f.Letter()) {
				m[f][ms.ds] = append(m[f][ms.ds], ms)
			}
		}
	}
	for f := Frequency(0); f < numFreq; f++ {
		for ds, w := range datasetMix[f] {
			if w > 0 && len(m[f][ds]) == 0 {
				panic(fmt.Sprintf("lakegen: dataset %s has weight at frequency %s but no measure", datasetNames[ds], f))
			}
		}
	}
	return m
}()

// seriesCore is what a series draws from its PRNG. It is cheap to compute and
// holds no strings; render turns it into the row attributes.
type seriesCore struct {
	freq    Frequency
	start   int // first year with rows
	measure *measure
	region  int
	product int
	logBase float64 // log value at the start of year start
}

// Salts separating the independent PRNG streams derived from the seed.
const (
	saltSeries = 0x5e71e5
	saltWalk   = 0x3a1c
	saltAnchor = 0xa7c402
	saltToken  = 0x70ce7
	saltOrder  = 0x5ff1e
)

// mix64 is the splitmix64 finalizer, a bijective 64-bit mixer.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// key derives a stream key from the seed and a salt.
func key(seed int64, salt uint64) uint64 { return mix64(uint64(seed) ^ mix64(salt)) }

func pick(r *rand.Rand, weights []float64) int {
	u := r.Float64()
	last := 0
	for i, w := range weights {
		if w <= 0 {
			continue
		}
		last = i
		if u < w {
			return i
		}
		u -= w
	}
	return last
}

// core draws series i's frequency, start year, measure, region, product and
// base level.
func (g *generator) core(i int, pcg *rand.PCG, r *rand.Rand) seriesCore {
	pcg.Seed(g.seriesKey, uint64(i))
	var c seriesCore
	c.freq = Frequency(pick(r, frequencyMix[:]))
	c.start = g.opt.FromYear
	if g.opt.ToYear > g.opt.FromYear && r.Float64() >= startAtFirstYear {
		c.start = g.opt.FromYear + 1 + r.IntN(g.opt.ToYear-g.opt.FromYear)
	}
	ds := pick(r, datasetMix[c.freq][:])
	ms := measuresFor[c.freq][ds]
	c.measure = ms[r.IntN(len(ms))]
	c.region = r.IntN(max(1, len(c.measure.regions)))
	c.product = r.IntN(max(1, len(c.measure.products)))
	c.logBase = math.Log(c.measure.level) + 0.3*r.NormFloat64()
	return c
}

// attrs are the per-series columns of a row.
type attrs struct {
	id, name, units, frequency, category string
}

// render builds series i's id and name. The id embeds token(i), which makes
// it unique.
func (g *generator) render(i int, c *seriesCore) attrs {
	m := c.measure
	var region string
	if len(m.regions) > 0 {
		region = m.regions[c.region]
	}
	var prod item
	if len(m.products) > 0 {
		prod = m.products[c.product]
	}
	var tok [6]byte
	g.token(i, &tok)

	var b strings.Builder
	b.Grow(48)
	b.WriteString(datasetNames[m.ds])
	b.WriteByte('.')
	expand(&b, m.code, "", prod.code, string(tok[:]))
	b.WriteByte('.')
	b.WriteString(c.freq.Letter())
	id := b.String()

	b = strings.Builder{}
	b.Grow(64)
	b.WriteString(freqWords[c.freq])
	b.WriteByte(' ')
	expand(&b, m.name, region, prod.name, "")
	return attrs{id: id, name: b.String(), units: m.units, frequency: freqNames[c.freq], category: m.category}
}

// expand writes template t with {r}, {p} and {u} replaced.
func expand(b *strings.Builder, t, r, p, u string) {
	for {
		i := strings.IndexByte(t, '{')
		if i < 0 || i+2 >= len(t) || t[i+2] != '}' {
			b.WriteString(t)
			return
		}
		b.WriteString(t[:i])
		switch t[i+1] {
		case 'r':
			b.WriteString(r)
		case 'p':
			b.WriteString(p)
		case 'u':
			b.WriteString(u)
		}
		t = t[i+3:]
	}
}

// maxSeries bounds Options.Series: token is a permutation of 30-bit numbers.
const maxSeries = 1 << 30

const base36 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"

// token writes six base-36 characters encoding a seeded permutation of i
// (a four-round Feistel network on 30 bits): distinct series get distinct
// tokens, which look random.
func (g *generator) token(i int, out *[6]byte) {
	x := uint32(i) & (maxSeries - 1)
	l, r := x>>15, x&0x7fff
	for round := uint64(0); round < 4; round++ {
		f := uint32(mix64(g.tokenKey^(round<<32)^uint64(r))) & 0x7fff
		l, r = r, l^f
	}
	v := l<<15 | r
	for k := 5; k >= 0; k-- {
		out[k] = base36[v%36]
		v /= 36
	}
}

// hashNormal returns a standard normal variate determined by (k, a, b).
func hashNormal(k, a, b uint64) float64 {
	h := mix64(k ^ mix64(a^mix64(b)))
	u1 := (float64(h>>11) + 0.5) / (1 << 53)
	u2 := float64(mix64(h)>>11) / (1 << 53)
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// anchors returns the log value of series i at the first period of year y and
// of year y+1. Year-start values follow a random walk whose step from year k
// to k+1 has standard deviation sqrt(n_k)·σ, n_k being the periods in year k.
func (g *generator) anchors(i int, c *seriesCore, y int) (float64, float64) {
	l := c.logBase
	sigma := stepSigma[c.freq]
	for k := c.start; ; k++ {
		step := math.Sqrt(float64(g.periodCount(c.freq, k))) * sigma * hashNormal(g.anchorKey, uint64(i), uint64(k))
		if k == y {
			return l, l + step
		}
		l += step
	}
}

// walk fills vals with series i's values in year y (len(vals) periods) and
// nulls with which of them are null: a Brownian bridge in log space between
// the two anchors, so consecutive years join up into one random walk.
func (g *generator) walk(i int, c *seriesCore, y int, vals []float64, nulls []bool, pcg *rand.PCG, r *rand.Rand) {
	n := len(vals)
	a, b := g.anchors(i, c, y)
	pcg.Seed(g.walkKey^uint64(y), uint64(i))
	sigma := stepSigma[c.freq]
	// vals[k] holds the free walk W_k (W_0 = 0) until the bridge correction.
	w := 0.0
	for k := range n {
		vals[k] = w
		w += sigma * r.NormFloat64()
	}
	// w is now W_n; pin X_n to b: X_k = a + W_k - (k/n)(W_n - (b - a)).
	corr := w - (b - a)
	p := pow10[c.measure.decimals]
	for k := range n {
		x := a + vals[k] - float64(k)/float64(n)*corr
		vals[k] = math.Round(math.Exp(x)*p) / p
	}
	for k := range n {
		nulls[k] = r.Float64() < nullRate
	}
}

var pow10 = [...]float64{1, 10, 100, 1000, 10000}
